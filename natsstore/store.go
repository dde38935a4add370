package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
)

// Config configures a [Store].
type Config struct {
	// Bucket is the name of the key-value bucket that holds the records:
	// letters, digits, '-' and '_'. It must exist (see [CreateBucket] and
	// `idem migrate`). Required.
	Bucket string

	// CallTimeout bounds each JetStream request (within the caller's
	// context): a request left unanswered, as while a stream elects a new
	// leader, fails after it and is retried by the engine. Defaults to 5s.
	CallTimeout time.Duration

	// APIPrefix is the JetStream API prefix, for a JetStream domain or an
	// account import. Defaults to "$JS.API.".
	APIPrefix string
}

// ErrBucketNotFound is returned by [New] when the bucket does not exist.
var ErrBucketNotFound = errors.New("natsstore: bucket not found (create it with idem migrate or natsstore.CreateBucket)")

var bucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func (c *Config) setDefaults() error {
	if c.Bucket == "" {
		return errors.New("natsstore: Config.Bucket is required")
	}
	if !bucketRe.MatchString(c.Bucket) {
		return fmt.Errorf("natsstore: Config.Bucket %q: a bucket name is letters, digits, '-' and '_'", c.Bucket)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 5 * time.Second
	}
	if c.CallTimeout < 0 {
		return errors.New("natsstore: Config.CallTimeout must not be negative")
	}
	if c.APIPrefix == "" {
		c.APIPrefix = jetstream.DefaultAPIPrefix
	}
	return nil
}

// Store is an [idem.Store] and [idem.Notifier] on a JetStream key-value
// bucket. It is safe for concurrent use.
type Store struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	bucket  string
	stream  string // the bucket's stream, KV_<bucket>
	getSubj string // the leader's message-get API subject of the stream
	timeout time.Duration
	closed  atomic.Bool
	// mix chooses Claim's first request: a read when recent claims mostly
	// found a record (a replay is then one request), else the write.
	mix claimmix.Mix
	// revs remembers the revisions of this store's claims, for Finish.
	revs revCache
	// scanWatch, when set (by this package's tests), replaces the
	// bucket's Watch in scan.
	scanWatch func(ctx context.Context, filter string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
	// writeGap, when set (by this package's tests), runs between a
	// decision and its conditional write (and between Sweep's scan and
	// its deletes): where another writer may step in.
	writeGap func()
}

var (
	_ idem.Store    = (*Store)(nil)
	_ idem.Notifier = (*Store)(nil)
)

// New returns a store on the bucket cfg.Bucket of the JetStream that nc
// reaches. The store does not own nc: Close leaves it open. ctx bounds
// looking up the bucket.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if nc == nil {
		return nil, errors.New("natsstore: nil connection")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.NewWithAPIPrefix(nc, cfg.APIPrefix, jetstream.WithDefaultTimeout(cfg.CallTimeout))
	if err != nil {
		return nil, fmt.Errorf("natsstore: %w", err)
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrBucketNotFound, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("natsstore: bucket %s: %w", cfg.Bucket, err)
	}
	stream := "KV_" + cfg.Bucket
	prefix := cfg.APIPrefix
	if prefix[len(prefix)-1] != '.' {
		prefix += "."
	}
	return &Store{nc: nc, js: js, kv: kv, bucket: cfg.Bucket, stream: stream,
		getSubj: prefix + "STREAM.MSG.GET." + stream, timeout: cfg.CallTimeout}, nil
}

// Close marks the store closed; later calls return idem.ErrClosed. It
// stops no watch of a Subscribe (their cancel functions do) and leaves the
// connection open.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return ctx.Err()
}

func storeErr(op string, err error) error {
	if errors.Is(err, idem.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &idem.StoreError{Op: op, Err: err}
}

// bounded bounds one request by the store's CallTimeout, within ctx's
// own deadline. A request JetStream leaves unanswered (a stream without a
// leader drops it, during an election) then fails after CallTimeout,
// and the engine retries it, instead of hanging until the caller's
// deadline.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// msgGetResponse is the answer of the stream's message-get API.
type msgGetResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Message *storedMsg `json:"message"`
}

// storedMsg is a message as the message-get API returns it. Its hdrs and
// data arrive base64-encoded, as encoding/json decodes a []byte.
type storedMsg struct {
	Seq    uint64 `json:"seq"`
	Header []byte `json:"hdrs"`
	Data   []byte `json:"data"`
}

// errNoMessage is JetStream's "no message found" (err_code 10037).
const errNoMessage = 10037

// read returns the record stored at k and its revision. An absent key
// returns a nil record and revision 0; a deleted one (a tombstone left by
// Release, Resolve or Sweep) a nil record and the tombstone's revision,
// which is what a write that re-creates the key must expect.
//
// It asks the stream's leader (the message-get API, not a direct get,
// which any replica may answer from a copy that lags): a decision is taken
// on the newest committed value, and a conditional write then checks it
// again.
func (s *Store) read(ctx context.Context, k string) (*idem.Record, uint64, error) {
	m, err := s.lastMsg(ctx, k)
	if err != nil || m == nil {
		return nil, 0, err
	}
	if deleted(m.Header) {
		return nil, m.Seq, nil
	}
	r, err := decodeRecord(m.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("key %s: %w", k, err)
	}
	return r, m.Seq, nil
}

// lastSeq returns the stream sequence of the last message the leader
// holds for the KV key filter (wildcards allowed), 0 if none.
func (s *Store) lastSeq(ctx context.Context, filter string) (uint64, error) {
	m, err := s.lastMsg(ctx, filter)
	if err != nil || m == nil {
		return 0, err
	}
	return m.Seq, nil
}

// lastMsg asks the stream's leader for the last message of the KV key (or
// key filter) k; nil if there is none.
func (s *Store) lastMsg(ctx context.Context, k string) (*storedMsg, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	req, _ := json.Marshal(struct {
		LastBy string `json:"last_by_subj"`
	}{"$KV." + s.bucket + "." + k})
	msg, err := s.nc.RequestWithContext(ctx, s.getSubj, req)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("natsstore: message get: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == errNoMessage {
			return nil, nil
		}
		return nil, fmt.Errorf("natsstore: message get: %s (%d)", resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return nil, errors.New("natsstore: message get: empty answer")
	}
	return resp.Message, nil
}

// readAny is read answered by any replica of the stream (the bucket's
// direct get, when the bucket allows it), whose copy may lag the leader's.
// A deleted key reads as absent at revision 0.
func (s *Store) readAny(ctx context.Context, k string) (*idem.Record, uint64, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	r, err := decodeRecord(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("key %s: %w", k, err)
	}
	return r, e.Revision(), nil
}

// deleted reports whether a stored message's headers mark a delete or a
// purge.
func deleted(hdr []byte) bool {
	if len(hdr) == 0 {
		return false
	}
	h, err := nats.DecodeHeadersMsg(hdr)
	if err != nil {
		return false
	}
	switch h.Get("KV-Operation") {
	case "DEL", "PURGE":
		return true
	}
	return h.Get(jetstream.MarkerReasonHeader) != ""
}

// conflict reports whether err is a conditional write that lost: the key's
// revision was not the one expected.
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
