package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"fhirstore/server/auth"
	"fhirstore/store"
)

// token prints a dev bearer token signed with the data dir's key, alone on stdout.
func token(args []string, stdout, _ io.Writer) error {
	cfg := newConfig("token", "data-dir", "tenant", "scope", "ttl")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore token --data-dir DIR --tenant NAME [--scope SCOPES] [--ttl 1h]")
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("token: unexpected argument %q; flags need dashes, as in --tenant %s (see fhirstore token -h)", pos[0], pos[0])
	}
	ttl, err := cfg.duration("ttl")
	if err != nil {
		return err
	}
	if err := store.ValidateTenantName(cfg.str("tenant")); err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	key, err := auth.LoadOrCreateDevKey(cfg.str("data-dir"))
	if err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.str("data-dir"), err)
	}
	tok, err := auth.SignHS256(key, auth.TokenRequest{Tenant: cfg.str("tenant"), Scope: cfg.str("scope"), TTL: ttl})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}
