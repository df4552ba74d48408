package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"

	"fhirstore/server/auth"
	"fhirstore/store"
)

const clientUsage = "fhirstore client create --tenant T --scope 'system/*.read ...' [--name N] [--jwks-file F | --jwks-url U]\n" +
	"       fhirstore client list [--tenant T]\n" +
	"       fhirstore client delete CLIENT_ID\n" +
	"       (each with [--data-dir DIR] [--mongodb-uri URI])"

// client manages the OAuth clients of the token endpoint. create prints
// the client id and, for a secret client, the secret: the only time it is
// shown, since only its hash is stored.
func client(ctx context.Context, args []string, stdout, _ io.Writer) error {
	cfg := newConfig("client", "data-dir", "mongodb-uri", "tenant", "scope", "name", "jwks-file", "jwks-url")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, clientUsage)
		}
		return err
	}
	if len(pos) == 0 {
		return errors.New("client: want create, list or delete CLIENT_ID")
	}
	verb, rest := pos[0], pos[1:]
	switch {
	case (verb == "create" || verb == "list") && len(rest) == 0:
	case verb == "delete" && len(rest) == 1:
	default:
		return fmt.Errorf("client: want create, list or delete CLIENT_ID, not %q", pos)
	}
	var c store.Client
	var secret string
	if verb == "create" {
		if c, secret, err = newClient(cfg); err != nil {
			return err
		}
	}
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), cfg.str("data-dir"), true, storeOptions{}, zap.NewNop())
	if err != nil {
		return err
	}
	defer db.close()
	switch verb {
	case "create":
		if err := db.store.CreateClient(ctx, c); err != nil {
			return err
		}
		if secret == "" {
			_, err = fmt.Fprintf(stdout, "client_id:     %s\n", c.ID)
			return err
		}
		_, err = fmt.Fprintf(stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; only its hash is stored)\n", c.ID, secret)
		return err
	case "delete":
		if err := db.store.DeleteClient(ctx, rest[0]); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "deleted client %s\n", rest[0])
		return err
	}
	clients, err := db.store.ListClients(ctx, cfg.str("tenant"))
	if err != nil {
		return err
	}
	for _, c := range clients {
		method := "secret"
		switch {
		case c.JWKSURL != "":
			method = "jwks_url " + c.JWKSURL
		case c.JWKS != "":
			method = "jwks"
		}
		if _, err := fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\n", c.ID, c.Tenant, c.Name, strings.Join(c.Scopes, " "), method); err != nil {
			return err
		}
	}
	return nil
}

// newClient checks the create flags and makes the client record with a
// fresh id, and a fresh secret unless it authenticates with keys.
func newClient(cfg *config) (store.Client, string, error) {
	tenant := cfg.str("tenant")
	if err := store.ValidateTenantName(tenant); err != nil {
		return store.Client{}, "", fmt.Errorf("--tenant: %w", err)
	}
	scopes := strings.Fields(cfg.str("scope"))
	if len(scopes) == 0 {
		return store.Client{}, "", errors.New("--scope: name the scopes the client may be granted")
	}
	c := store.Client{ID: strings.ToLower(auth.NewClientSecret()), Tenant: tenant, Name: cfg.str("name"), Scopes: scopes}
	file, url := cfg.str("jwks-file"), cfg.str("jwks-url")
	switch {
	case file != "" && url != "":
		return store.Client{}, "", errors.New("client: give --jwks-file or --jwks-url, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return store.Client{}, "", fmt.Errorf("--jwks-file: %w", err)
		}
		if _, err := auth.ParseJWKS(b); err != nil {
			return store.Client{}, "", fmt.Errorf("--jwks-file %s: %w", file, err)
		}
		// Keep the public members only, should the file hold private keys too.
		var set auth.JWKS
		if err := json.Unmarshal(b, &set); err != nil {
			return store.Client{}, "", fmt.Errorf("--jwks-file %s: %w", file, err)
		}
		pub, err := json.Marshal(set)
		if err != nil {
			return store.Client{}, "", err
		}
		c.JWKS = string(pub)
		return c, "", nil
	case url != "":
		if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
			return store.Client{}, "", fmt.Errorf("--jwks-url: %q is not an http(s) URL", url)
		}
		c.JWKSURL = url
		return c, "", nil
	}
	secret := auth.NewClientSecret()
	hash, err := auth.HashSecret(secret)
	if err != nil {
		return store.Client{}, "", err
	}
	c.SecretHash = hash
	return c, secret, nil
}
