// Command payments is a small payments HTTP service (charges and refunds)
// that runs each payment exactly once through idem, forwards a stable key to
// its card provider, and recovers and reconciles what it could not decide.
//
//	go run ./examples/payments --store payments.db --provider http://127.0.0.1:9090
//
// POST /charges and POST /refunds take an Idempotency-Key header and a body
// {"order_id": "o-1", "amount": 1250, "currency": "EUR"} (amount in minor
// units). A lost provider answer leaves the payment unknown; the recovery
// hook asks the provider about it every --recover-every, the reconciler
// compares both sides every --reconcile-every, and POST /admin/recover and
// POST /admin/reconcile run them now.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on (port 0: any free port)")
	dsn := flag.String("store", "payments.db", "SQLite file, or a postgres:// DSN")
	provider := flag.String("provider", "http://127.0.0.1:9090", "card provider base URL")
	redrivable := flag.Bool("redrivable", false, "the provider honours Idempotency-Key: retried unknown payments may call it again")
	lease := flag.Duration("lease", 30*time.Second, "how long an attempt holds a key without a heartbeat")
	timeout := flag.Duration("timeout", 10*time.Second, "bound on one provider call; past it the payment is unknown")
	recoverEvery := flag.Duration("recover-every", time.Minute, "how often the recovery hook looks at unknown payments")
	reconcileEvery := flag.Duration("reconcile-every", 10*time.Minute, "how often the reconciler runs")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := openStore(ctx, *dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := newApp(st, appConfig{Provider: strings.TrimRight(*provider, "/"), Redrivable: *redrivable,
		Lease: *lease, Timeout: *timeout, ReconcileEvery: *reconcileEvery})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// The line tests and scripts wait for.
	fmt.Printf("payments: listening on http://%s\n", ln.Addr())
	go a.background(ctx, *recoverEvery)
	if *reconcileEvery > 0 {
		if err := a.reco.Start(ctx); err != nil {
			return err
		}
		defer a.reco.Stop()
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func openStore(ctx context.Context, dsn string) (idem.Store, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return openPostgres(ctx, dsn)
	}
	return sqlitestore.Open(ctx, dsn, sqlitestore.Config{Migrate: true})
}
