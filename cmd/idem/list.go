package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

func cmdList(ctx context.Context, e *env, args []string) int {
	f := e.newFlags("list", "idem list [--store DSN] [--state STATE] [--older-than DUR] [--scope S] [--limit N] [--spool DIR] [--json] [--encryption-key-file FILE]",
		"List records, oldest first, as a table (or JSON lines with --json), and the\n"+
			"outcomes waiting in the proxy's spool for the store to take them.",
		"idem list --store sqlite://idem.db --state unknown --older-than 1h")
	dsn := f.String("store", storeopen.Default, "store DSN: "+storeDSNs)
	state := f.String("state", "", "only records in this state: in_progress, succeeded, failed or unknown")
	olderThan := f.duration("older-than", 0, "only records created longer ago than this (e.g. 15m, 2d)")
	scope := f.String("scope", "", "only records in this scope")
	limit := f.Int("limit", 1000, "at most this many records (0: all)")
	asJSON := f.Bool("json", false, "print one JSON object per line")
	spoolDir := f.String("spool", DefaultSpool, "the proxy's spool directory, whose waiting outcomes are listed too (empty: none)")
	keyFile := f.keyFile()
	pos, code, ok := f.parse(args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return f.usageError("unexpected argument %q", pos[0])
	}
	keys, code, ok := f.loadKeys(*keyFile)
	if !ok {
		return code
	}
	filter := idem.ListFilter{Scope: *scope, Limit: *limit}
	if *state != "" {
		s, err := idem.ParseState(*state)
		if err != nil {
			return f.usageError("--state: %v", err)
		}
		filter.States = []idem.State{s}
		if s == idem.StateUnknown {
			// An in_progress record whose lease has passed is unknown to
			// every reader; list it with the unknown ones.
			filter.States = append(filter.States, idem.StateInProgress)
		}
	}
	now := time.Now()
	if *olderThan > 0 {
		filter.CreatedBefore = now.Add(-*olderThan).UTC()
	}
	if *limit < 0 {
		return f.usageError("--limit must not be negative")
	}
	st, code, ok := openExisting(ctx, f, *dsn)
	if !ok {
		return code
	}
	defer st.Close()
	recs, err := st.List(ctx, filter)
	if err != nil {
		return f.fail(err)
	}
	if *state != "" {
		recs = byEffectiveState(recs, *state, now)
	}
	// A record encrypted with a key not in the key file is listed
	// without its intent and response, and makes the exit status 1.
	sealed := map[string]int{}
	for i := range recs {
		if err := keys.OpenRecord(&recs[i]); err != nil {
			sealed[sealedID(&recs[i])]++
			recs[i].Intent, recs[i].Result = nil, nil
		}
	}
	var spooled []idem.SpooledOutcome
	if *spoolDir != "" {
		var bad []string
		if spooled, bad, err = idem.ReadSpool(*spoolDir); err != nil {
			return f.fail(err)
		}
		if len(bad) > 0 {
			fmt.Fprintf(e.stderr, "idem list: %d spool files in %s cannot be read: %s\n", len(bad), *spoolDir, strings.Join(bad, ", "))
		}
		for i := range spooled {
			o := &spooled[i]
			if res, err := keys.OpenResult(o.Scope, o.Key, o.Result); err == nil {
				o.Result = res
			} else {
				sealed[keyIDOf(o.Result)]++
				o.Result = nil
			}
		}
	}
	if len(sealed) > 0 {
		defer func() {
			for id, n := range sealed {
				fmt.Fprintf(e.stderr, "idem list: %d records are encrypted with key id %q, which --encryption-key-file does not hold: listed without their intent and response\n", n, id)
			}
		}()
	}
	status := func(code int) int {
		if code == exitOK && len(sealed) > 0 {
			return exitFailure
		}
		return code
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for i := range recs {
			if err := enc.Encode(toJSON(&recs[i], now)); err != nil {
				return f.fail(err)
			}
		}
		for i := range spooled {
			if err := enc.Encode(spooledJSON(&spooled[i])); err != nil {
				return f.fail(err)
			}
		}
		return status(exitOK)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSCOPE\tSTATE\tFENCE\tMETHOD\tPATH\tAMOUNT\tSTATUS\tAGE\tCREATED")
	for i := range recs {
		r := &recs[i]
		method, path, amount := intentColumns(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, shortScope(r.Scope), effState(r, now), r.Fence,
			method, path, amount, httpStatus(r), now.Sub(r.CreatedAt).Truncate(time.Second), r.CreatedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil || len(spooled) == 0 {
		return status(exitFailureIf(err))
	}
	fmt.Fprintf(e.stdout, "\n%d outcomes spooled in %s, applied to the store when it answers:\n", len(spooled), *spoolDir)
	fmt.Fprintln(tw, "KEY\tSCOPE\tOUTCOME\tFENCE\tSTATUS\tSPOOLED")
	for i := range spooled {
		o := &spooled[i]
		r := idem.Record{Result: o.Result}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", o.Key, shortScope(o.Scope), spooledOutcome(o), o.Fence,
			httpStatus(&r), o.SpooledAt.Format(time.RFC3339))
	}
	return status(exitFailureIf(tw.Flush()))
}

func exitFailureIf(err error) int {
	if err != nil {
		return exitFailure
	}
	return exitOK
}

// byEffectiveState keeps the records whose effective state (see effState)
// is state.
func byEffectiveState(recs []idem.Record, state string, now time.Time) []idem.Record {
	out := recs[:0]
	for i := range recs {
		r := &recs[i]
		if string(r.EffectiveState(now)) == state {
			out = append(out, *r)
		}
	}
	return out
}
