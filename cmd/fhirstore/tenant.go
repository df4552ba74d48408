package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"
)

// tenant manages the tenant registry: create, list or delete NAME.
func tenant(ctx context.Context, args []string, stdout, _ io.Writer) error {
	cfg := newConfig("tenant", "data-dir", "mongodb-uri")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore tenant create|list|delete [NAME] [--data-dir DIR] [--mongodb-uri URI]")
		}
		return err
	}
	if len(pos) == 0 {
		return errors.New("tenant: want create NAME, list or delete NAME, as in: fhirstore tenant create acme (see fhirstore tenant -h)")
	}
	verb, names := pos[0], pos[1:]
	switch {
	case verb == "list" && len(names) == 0:
	case (verb == "create" || verb == "delete") && len(names) == 1:
	default:
		return fmt.Errorf("tenant: want create NAME, list or delete NAME, not %q (see fhirstore tenant -h)", strings.Join(pos, " "))
	}
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), cfg.str("data-dir"), true, storeOptions{}, zap.NewNop())
	if err != nil {
		return err
	}
	defer db.close()
	switch verb {
	case "create":
		if err := db.store.CreateTenant(ctx, names[0]); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "created tenant %s\n", names[0])
	case "delete":
		if err := db.store.DeleteTenant(ctx, names[0]); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "deleted tenant %s and all its data\n", names[0])
	default:
		tenants, lerr := db.store.ListTenants(ctx)
		if lerr != nil {
			return lerr
		}
		for _, t := range tenants {
			if _, err = fmt.Fprintln(stdout, t.Name); err != nil {
				break
			}
		}
	}
	return err
}
