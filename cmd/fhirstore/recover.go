package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/store"
)

// recoverCmd lists the unfinished transactions of every tenant, and
// retries or abandons the committed ones recovery could not apply.
func recoverCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("recover", "list", "retry", "abandon", "data-dir", "mongodb-uri")
	pos, err := cfg.parse(boolFlagArgs(args, "list"))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore recover [--list | --retry TXN|all | --abandon TXN] [--data-dir DIR] [--mongodb-uri URI]")
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("recover takes no arguments, not %q (see fhirstore recover -h)", strings.Join(pos, " "))
	}
	list, err := strconv.ParseBool(cfg.str("list"))
	if err != nil {
		return fmt.Errorf("--list: %q is not true or false", cfg.str("list"))
	}
	retry, abandon := cfg.str("retry"), cfg.str("abandon")
	if retry != "" && abandon != "" || (retry != "" || abandon != "") && list {
		return errors.New("recover: give one of --list, --retry or --abandon (see fhirstore recover -h)")
	}
	registry, err := search.NewRegistry(fhirschema.StoredTypes())
	if err != nil {
		return err
	}
	// Listing may run beside a server; changing what is current may not
	// on the embedded engine, whose server keeps search results its own
	// writes decide.
	share := retry == "" && abandon == ""
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), cfg.str("data-dir"), share, storeOptions{registry: registry}, zap.NewNop())
	if err != nil {
		if errors.Is(err, errInUse) {
			return fmt.Errorf("%w; stop it before --retry or --abandon (--list works beside it)", err)
		}
		return err
	}
	defer db.close()
	switch {
	case retry != "":
		return retryTxns(ctx, db.store, retry, stdout)
	case abandon != "":
		u, err := db.store.AbandonTransaction(ctx, abandon)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "abandoned transaction %s of tenant %s: %s are back at their versions before it\n", u.ID, u.Tenant, strings.Join(u.Resources, ", "))
		return err
	}
	txns, err := db.store.UnfinishedTransactions(ctx)
	if err != nil {
		return err
	}
	return printTxns(stdout, txns)
}

// retryTxns retries one transaction, or with "all" every committed one
// recovery could not apply; any failure fails the command.
func retryTxns(ctx context.Context, st *store.Store, which string, stdout io.Writer) error {
	if which != "all" {
		u, err := st.RetryTransaction(ctx, which)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "applied transaction %s of tenant %s: %s\n", u.ID, u.Tenant, strings.Join(u.Resources, ", "))
		return err
	}
	txns, err := st.UnfinishedTransactions(ctx)
	if err != nil {
		return err
	}
	tried, failed := 0, 0
	for _, t := range txns {
		if t.State != store.TxnRetrying && t.State != store.TxnQuarantined {
			continue
		}
		tried++
		if _, err := st.RetryTransaction(ctx, t.ID); err != nil {
			failed++
			fmt.Fprintf(stdout, "transaction %s of tenant %s could not be applied: %v\n", t.ID, t.Tenant, err)
			continue
		}
		fmt.Fprintf(stdout, "applied transaction %s of tenant %s: %s\n", t.ID, t.Tenant, strings.Join(t.Resources, ", "))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d transactions could not be applied", failed, tried)
	}
	_, err = fmt.Fprintf(stdout, "transactions applied: %d\n", tried)
	return err
}

// printTxns writes one block per unfinished transaction.
func printTxns(w io.Writer, txns []store.UnfinishedTxn) error {
	if len(txns) == 0 {
		_, err := fmt.Fprintln(w, "no unfinished transactions")
		return err
	}
	for _, t := range txns {
		fmt.Fprintf(w, "%s  tenant %s  %s  started %s", t.ID, t.Tenant, t.State, t.At.UTC().Format(time.RFC3339))
		if t.Attempts > 0 {
			fmt.Fprintf(w, "  failed attempts: %d", t.Attempts)
		}
		if !t.RetryAt.IsZero() {
			fmt.Fprintf(w, "  next attempt %s", t.RetryAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "\n  resources: %s\n", strings.Join(t.Resources, ", "))
		if t.LastError != "" {
			fmt.Fprintf(w, "  last error: %s\n", t.LastError)
		}
	}
	_, err := fmt.Fprintf(w, "unfinished transactions: %d\n", len(txns))
	return err
}
