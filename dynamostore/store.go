package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/claimmix"
)

// API is the part of the DynamoDB client the store calls.
// *dynamodb.Client implements it; a test may wrap one (to drop answers,
// count calls) but the store is only ever tested against a real DynamoDB
// or dynalite.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Config configures a [Store].
type Config struct {
	// Table is the DynamoDB table's name (3 to 255 of a-z, A-Z, 0-9, '_',
	// '-', '.'). Required.
	Table string

	// TTLGrace is added to a record's ExpiresAt to form its TTL attribute,
	// the time after which DynamoDB may delete the item. Claim decides
	// expiry from the stored ExpiresAt and the caller's clock, never from
	// the TTL (DynamoDB deletes expired items up to days late, and a
	// record past its ExpiresAt that TTL has not removed yet is re-claimed
	// as a new intent, never replayed), so the grace only has to cover
	// clock skew between the callers and AWS: TTL must never delete a
	// record before callers consider it expired. Defaults to 1 hour.
	TTLGrace time.Duration

	// IndexShards is how many partition keys each state has in the
	// idem-state-age index, and terminal records in the idem-expiry index:
	// one partition key of a global secondary index takes at most 1,000
	// writes a second, and every claim and outcome writes the state index.
	// List and Sweep query every shard. It may grow over a table's life
	// but must never shrink: records written to a shard above the new
	// count would no longer be listed or swept. Defaults to 8.
	IndexShards int
}

// Store is an [idem.Store] on a DynamoDB table. It is safe for concurrent
// use. It has no notifier: waiters poll with capped backoff.
type Store struct {
	api    API
	table  *string
	grace  time.Duration
	shards int
	mix    claimmix.Mix
	closed atomic.Bool
}

var _ idem.Store = (*Store)(nil)

// ErrBadConfig is matched (errors.Is) by New's error for a Config it
// cannot run with; the error names the field.
var ErrBadConfig = errors.New("dynamostore: bad config")

// New returns a store on cfg.Table through api (a *dynamodb.Client). It
// makes no request: the table is created by [Store.Migrate] (or `idem
// migrate`) and checked by [Store.CheckSchema] (or `idem doctor`).
func New(api API, cfg Config) (*Store, error) {
	if api == nil {
		return nil, fmt.Errorf("%w: nil client", ErrBadConfig)
	}
	if err := validTable(cfg.Table); err != nil {
		return nil, err
	}
	if cfg.TTLGrace == 0 {
		cfg.TTLGrace = time.Hour
	}
	if cfg.TTLGrace < 0 {
		return nil, fmt.Errorf("%w: Config.TTLGrace must not be negative", ErrBadConfig)
	}
	if cfg.IndexShards == 0 {
		cfg.IndexShards = 8
	}
	if !validShards(cfg.IndexShards) {
		return nil, fmt.Errorf("%w: Config.IndexShards must be 1 to 1000, got %d", ErrBadConfig, cfg.IndexShards)
	}
	t := cfg.Table
	return &Store{api: api, table: &t, grace: cfg.TTLGrace, shards: cfg.IndexShards}, nil
}

// validTable checks a table name as DynamoDB does.
func validTable(name string) error {
	if len(name) < 3 || len(name) > 255 {
		return fmt.Errorf("%w: Config.Table %q: a table name has 3 to 255 characters", ErrBadConfig, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%w: Config.Table %q: byte %d may not appear in a table name (a-z, A-Z, 0-9, '_', '-', '.')", ErrBadConfig, name, i)
		}
	}
	return nil
}

// Table returns the table's name.
func (s *Store) Table() string { return *s.table }

// Close marks the store closed; later calls return idem.ErrClosed. It
// does not close the client (an AWS SDK client holds nothing to close).
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *Store) check() error {
	if s.closed.Load() {
		return idem.ErrClosed
	}
	return nil
}

func storeErr(op string, err error) error {
	return &idem.StoreError{Op: op, Err: err}
}

// isCondFailed reports whether err is DynamoDB's answer to a condition
// that did not hold: the write did nothing.
func isCondFailed(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ConditionalCheckFailedException"
}
