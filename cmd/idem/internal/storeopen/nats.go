package storeopen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/natsstore"
)

// NATS DSNs:
//
//	nats://[user:pass@]host:port[,host:port…]/BUCKET[?param=value…]
//
// name the servers (port 4222 when none is given; the client follows
// the cluster to the others when one fails) and the key-value bucket the
// records live in. Parameters:
//
//	replicas=3        the bucket's replicas, for idem migrate's creation
//	                  (1 to 5; default 3: fewer is refused by the
//	                  durability check)
//	storage=file      file or memory, for idem migrate's creation
//	                  (default file: memory is refused by the check)
//	call_timeout=5s   how long each JetStream request may take
//
// A bucket that exists already is checked against replicas and storage
// by idem migrate; opening a store never creates one.

// natsKeys are the query parameters a NATS DSN takes.
var natsKeys = []string{"replicas", "storage", "call_timeout"}

var natsBucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// natsOpts is a parsed NATS DSN.
type natsOpts struct {
	servers        []string
	user, password string
	bucket         natsstore.BucketConfig
	callTimeout    time.Duration
}

func checkNATS(d DSN) error {
	_, err := parseNATS(d)
	return err
}

// parseNATS parses a nats:// DSN. It never contacts a server.
func parseNATS(d DSN) (natsOpts, error) {
	var o natsOpts
	userinfo, hosts, path, query := splitAuthority(d.Target)
	if userinfo != "" {
		ui := strings.TrimSuffix(userinfo, "@")
		u, p, _ := strings.Cut(ui, ":")
		var err error
		if o.user, err = url.PathUnescape(u); err == nil {
			o.password, err = url.PathUnescape(p)
		}
		if err != nil {
			return o, errors.New("credentials are not URL-escaped")
		}
	}
	for _, h := range hosts {
		hp, err := hostPort("server", h, "4222")
		if err != nil {
			return o, err
		}
		o.servers = append(o.servers, "nats://"+hp)
	}
	bucket := strings.TrimPrefix(path, "/")
	if bucket == "" {
		return o, errors.New("no bucket; write nats://127.0.0.1:4222/idem")
	}
	if !natsBucketRe.MatchString(bucket) {
		return o, fmt.Errorf("bucket %q: a bucket name is letters, digits, '-' and '_'", bucket)
	}
	o.bucket = natsstore.BucketConfig{Bucket: bucket, Replicas: 3}
	q, err := url.ParseQuery(query)
	if err != nil {
		return o, fmt.Errorf("query: %w", err)
	}
	for k := range q {
		if !contains(natsKeys, k) {
			return o, fmt.Errorf("unknown parameter %q; nats:// takes %s", k, strings.Join(natsKeys, ", "))
		}
	}
	if v := q.Get("replicas"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return o, fmt.Errorf("replicas=%q is not a number from 1 to 5", v)
		}
		o.bucket.Replicas = n
	}
	switch v := q.Get("storage"); v {
	case "", "file":
	case "memory":
		o.bucket.Memory = true
	default:
		return o, fmt.Errorf("storage=%q: want file or memory", v)
	}
	if v := q.Get("call_timeout"); v != "" {
		t, err := time.ParseDuration(v)
		if err != nil || t <= 0 {
			return o, fmt.Errorf("call_timeout=%q is not a positive duration such as 5s", v)
		}
		o.callTimeout = t
	}
	return o, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// connectNATS connects to the DSN's servers.
func (o natsOpts) connect() (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("idem"), nats.MaxReconnects(-1)}
	if o.user != "" || o.password != "" {
		opts = append(opts, nats.UserInfo(o.user, o.password))
	}
	return nats.Connect(strings.Join(o.servers, ","), opts...)
}

// NATSConnect connects to the servers of d, a nats:// DSN, and returns the
// bucket the DSN describes, for the bench's raw baseline beside the store.
func NATSConnect(d DSN) (*nats.Conn, natsstore.BucketConfig, error) {
	o, err := parseNATS(d)
	if err != nil {
		return nil, natsstore.BucketConfig{}, err
	}
	nc, err := o.connect()
	return nc, o.bucket, err
}

// openNATS opens a store on the DSN's bucket; with opt.Migrate it first
// creates the bucket (as idem migrate does).
func openNATS(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	o, err := parseNATS(d)
	if err != nil {
		return nil, err
	}
	nc, err := o.connect()
	if err != nil {
		return nil, err
	}
	if opt.Migrate {
		if err := natsstore.CreateBucket(ctx, nc, o.bucket); err != nil {
			nc.Close()
			return nil, err
		}
	}
	st, err := natsstore.New(ctx, nc, natsstore.Config{Bucket: o.bucket.Bucket, CallTimeout: o.callTimeout})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsStore{Store: st, nc: nc}, nil
}

// natsStore closes the connection the CLI opened with the store. It
// passes on the store's notifications and checks, but not a clock: the
// store has none, and the engine measures none for it.
type natsStore struct {
	*natsstore.Store
	nc *nats.Conn
}

// Close closes the store, then its connection.
func (s *natsStore) Close() error {
	err := s.Store.Close()
	s.nc.Close()
	return err
}

// provisionNATS creates the DSN's bucket (idem migrate).
func provisionNATS(ctx context.Context, d DSN) (string, error) {
	o, err := parseNATS(d)
	if err != nil {
		return "", err
	}
	nc, err := o.connect()
	if err != nil {
		return "", err
	}
	defer nc.Close()
	if err := natsstore.CreateBucket(ctx, nc, o.bucket); err != nil {
		return "", err
	}
	storage := "file"
	if o.bucket.Memory {
		storage = "memory"
	}
	return fmt.Sprintf("bucket %s: %d replicas, %s storage, one value per key, no TTL", o.bucket.Bucket, o.bucket.Replicas, storage), nil
}
