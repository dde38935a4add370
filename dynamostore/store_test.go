package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func claimP(key, attempt string, now time.Time) idem.ClaimParams {
	return idem.ClaimParams{Scope: "tenant-a", Key: key, AttemptID: attempt, Fingerprint: idem.NewFingerprint([]byte("req")),
		Intent: []byte(`{"op":"charge"}`), Now: now, LeaseUntil: now.Add(30 * time.Second)}
}

func finishP(r idem.Record, st idem.State, result string, now time.Time) idem.FinishParams {
	p := idem.FinishParams{Scope: r.Scope, Key: r.Key, Fence: r.Fence, AttemptID: r.AttemptID, State: st, CompletedAt: now}
	if st.Terminal() {
		p.Result, p.ExpiresAt = []byte(result), now.Add(time.Hour)
	}
	return p
}

func mustClaim(t *testing.T, s *Store, p idem.ClaimParams) idem.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// rawItem reads the item as DynamoDB holds it.
func rawItem(t *testing.T, s *Store, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.api.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: s.table, Key: keyOf("tenant-a", key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func numAttr(it map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n, true
}

// TestExpiredRecordIsNeverReplayed: DynamoDB's TTL deletes expired items
// hours or days late (dynalite never does), so an expired record is
// still in the table; a claim at its expiry takes it over as a new
// intent, in both claim paths, and never replays it.
func TestExpiredRecordIsNeverReplayed(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		t.Run("readFirst="+strconv.FormatBool(readFirst), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t, Config{TTLGrace: time.Minute})
			r := mustClaim(t, s, claimP("k", "a1", t0)).Record
			fin, err := s.Finish(ctx, finishP(r, idem.StateSucceeded, "ok", t0))
			if err != nil {
				t.Fatal(err)
			}
			it := rawItem(t, s, "k")
			ttl, ok := numAttr(it, attrTTL)
			if want := fin.ExpiresAt.Add(time.Minute).Unix(); !ok || ttl != want {
				t.Fatalf("ttl attribute = %d (present %v), want ExpiresAt + grace = %d", ttl, ok, want)
			}
			s.mix.Pin(readFirst)
			early := mustClaim(t, s, claimP("k", "a2", fin.ExpiresAt.Add(-time.Microsecond)))
			if early.Claimed || early.Record.State != idem.StateSucceeded || string(early.Record.Result) != "ok" {
				t.Fatalf("claim before expiry = %+v, want the recorded outcome", early)
			}
			s.mix.Pin(readFirst)
			late := mustClaim(t, s, claimP("k", "a3", fin.ExpiresAt))
			if !late.Claimed || late.Record.Fence != 2 || late.Record.State != idem.StateInProgress {
				t.Fatalf("claim at expiry of a record TTL has not deleted = %+v, want a new claim at fence 2", late)
			}
			it = rawItem(t, s, "k")
			for _, name := range []string{attrTTL, attrExpires, attrExpiryShard, attrResult, attrCompleted} {
				if _, ok := it[name]; ok {
					t.Fatalf("re-claimed item keeps %s: %v", name, it[name])
				}
			}
			got, err := s.Get(ctx, "tenant-a", "k")
			if err != nil || got.AttemptID != "a3" || got.Result != nil {
				t.Fatalf("Get after take-over = %+v, %v", got, err)
			}
		})
	}
}

// TestUnknownHasNoTTL: unknown records are evidence; DynamoDB's TTL must
// never delete them, and no claim takes them over.
func TestUnknownHasNoTTL(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	r := mustClaim(t, s, claimP("u", "a1", t0)).Record
	if _, err := s.Finish(ctx, finishP(r, idem.StateUnknown, "", t0)); err != nil {
		t.Fatal(err)
	}
	if it := rawItem(t, s, "u"); it[attrTTL] != nil || it[attrExpiryShard] != nil {
		t.Fatalf("unknown item carries TTL or expiry index keys: %v", it)
	}
	if res := mustClaim(t, s, claimP("u", "a2", t0.Add(10000*time.Hour))); res.Claimed {
		t.Fatalf("claimed over an unknown record: %+v", res)
	}
}

// hookAPI is a real client with a hook run before some calls, to put
// another writer's step into the gap between a store's read and its
// conditional write, deterministically.
type hookAPI struct {
	API
	mu                      sync.Mutex
	beforePut, beforeDelete func(in any)
	gets                    []*dynamodb.GetItemInput
}

func (h *hookAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	h.mu.Lock()
	f := h.beforePut
	h.beforePut = nil
	h.mu.Unlock()
	if f != nil {
		f(in)
	}
	return h.API.PutItem(ctx, in, o...)
}

func (h *hookAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	h.mu.Lock()
	f := h.beforeDelete
	h.beforeDelete = nil
	h.mu.Unlock()
	if f != nil {
		f(in)
	}
	return h.API.DeleteItem(ctx, in, o...)
}

func (h *hookAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	h.mu.Lock()
	h.gets = append(h.gets, in)
	h.mu.Unlock()
	return h.API.GetItem(ctx, in, o...)
}

// TestTakeOverLosesToAFasterClaimer: two claimers read one expired
// record; the other takes it over and records a new outcome before this
// one's take-over put lands. The put's condition (same fence, terminal,
// expired) must refuse it, and the claimer gets the new outcome.
func TestTakeOverLosesToAFasterClaimer(t *testing.T) {
	ctx := context.Background()
	other, s, h := hookedPair(t)
	r := mustClaim(t, other, claimP("k", "a1", t0)).Record
	fin, err := other.Finish(ctx, finishP(r, idem.StateSucceeded, "first", t0))
	if err != nil {
		t.Fatal(err)
	}
	at := fin.ExpiresAt
	h.beforePut = func(any) {
		r2 := mustClaim(t, other, claimP("k", "b1", at)).Record
		if _, err := other.Finish(ctx, finishP(r2, idem.StateSucceeded, "second", at)); err != nil {
			t.Error(err)
		}
	}
	s.mix.Pin(true) // read first: the read sees the expired record
	res := mustClaim(t, s, claimP("k", "c1", at))
	if res.Claimed || res.Record.AttemptID != "b1" || string(res.Record.Result) != "second" || res.Record.Fence != 2 {
		t.Fatalf("late take-over = %+v, want the faster claimer's recorded outcome at fence 2", res)
	}
}

// TestSweepSparesARecordReclaimedMeanwhile: the sweeper reads the expiry
// index, then the key is re-claimed before its delete lands; the delete's
// condition must spare the new claim.
func TestSweepSparesARecordReclaimedMeanwhile(t *testing.T) {
	ctx := context.Background()
	other, s, h := hookedPair(t)
	r := mustClaim(t, other, claimP("k", "a1", t0)).Record
	fin, err := other.Finish(ctx, finishP(r, idem.StateSucceeded, "v", t0))
	if err != nil {
		t.Fatal(err)
	}
	at := fin.ExpiresAt
	h.beforeDelete = func(any) {
		if res := mustClaim(t, other, claimP("k", "a2", at)); !res.Claimed {
			t.Errorf("re-claim in the gap = %+v", res)
		}
	}
	n, err := s.Sweep(ctx, idem.SweepParams{Now: at})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "tenant-a", "k")
	if n != 0 || err != nil || got.AttemptID != "a2" || got.State != idem.StateInProgress {
		t.Fatalf("sweep deleted %d; record after = %+v, %v; want the new claim kept", n, got, err)
	}
	// With nothing in the gap, the expired record goes.
	r3 := mustClaim(t, other, claimP("x", "a1", t0)).Record
	if _, err := other.Finish(ctx, finishP(r3, idem.StateFailed, "boom", t0)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, idem.SweepParams{Now: at}); n != 1 || err != nil {
		t.Fatalf("sweep of an expired record = %d, %v; want 1", n, err)
	}
}

// TestReadsAreStronglyConsistent: every GetItem the store sends asks for
// a strongly consistent read. An eventually consistent read could miss a
// claim made a moment ago, and the duplicate would run the effect.
// (dynalite answers every read consistently, so only the request shows
// it.)
func TestReadsAreStronglyConsistent(t *testing.T) {
	ctx := context.Background()
	_, s, h := hookedPair(t)
	s.mix.Pin(true)
	r := mustClaim(t, s, claimP("k", "a1", t0)).Record
	mustClaim(t, s, claimP("k", "a2", t0))
	if _, err := s.Get(ctx, "tenant-a", "k"); err != nil {
		t.Fatal(err)
	}
	stale := finishP(r, idem.StateSucceeded, "v", t0)
	stale.Fence = 7
	if _, err := s.Finish(ctx, stale); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("stale finish = %v", err)
	}
	if len(h.gets) < 3 {
		t.Fatalf("%d GetItem calls, want at least 3", len(h.gets))
	}
	for i, in := range h.gets {
		if !aws.ToBool(in.ConsistentRead) {
			t.Fatalf("GetItem %d is eventually consistent", i)
		}
	}
}

func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	r := mustClaim(t, s, claimP("k", "a1", t0)).Record
	hb := idem.HeartbeatParams{Scope: "tenant-a", Key: "k", Fence: 2, AttemptID: "a1", LeaseUntil: t0.Add(time.Minute)}
	if err := s.Heartbeat(ctx, hb); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("heartbeat at another fence = %v, want ErrFenced", err)
	}
	hb.Fence = 1
	if err := s.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "tenant-a", "k"); !got.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("lease after heartbeat = %v", got.LeaseUntil)
	}
	other := finishP(r, idem.StateSucceeded, "v", t0)
	other.AttemptID = "intruder"
	if _, err := s.Finish(ctx, other); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("finish by another attempt = %v, want ErrFenced", err)
	}
	stale := finishP(r, idem.StateSucceeded, "v", t0)
	stale.Fence = 2
	if _, err := s.Finish(ctx, stale); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("finish at another fence = %v, want ErrFenced", err)
	}
	if _, err := s.Finish(ctx, finishP(r, idem.StateSucceeded, "v", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, hb); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("heartbeat on a succeeded record = %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, idem.ReleaseParams{Scope: "tenant-a", Key: "k", Fence: 1, AttemptID: "a1"}); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("release of a succeeded record = %v, want ErrFenced", err)
	}
	if _, err := s.Finish(ctx, finishP(r, idem.StateInProgress, "", t0)); err == nil || errors.Is(err, idem.ErrFenced) {
		t.Fatalf("finish to in_progress = %v, want a plain error", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	c := testClient("http://127.0.0.1:1")
	for _, cfg := range []Config{{}, {Table: "ab"}, {Table: "bad name"}, {Table: "idem", TTLGrace: -1}, {Table: "idem", IndexShards: 1001}} {
		if _, err := New(c, cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%+v) = %v, want ErrBadConfig", cfg, err)
		}
	}
	if _, err := New(nil, Config{Table: "idem"}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("New(nil client) = %v, want ErrBadConfig", err)
	}
}

func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	v, findings, err := s.CheckSchema(ctx)
	if err != nil || v != SchemaVersion {
		t.Fatalf("CheckSchema = %d, %v, %v", v, findings, err)
	}
	for _, f := range findings {
		// dynalite has no TTL API: the one finding is TTL, a warning.
		if f.Severity != idem.SeverityWarning || f.Setting != "TimeToLive" {
			t.Fatalf("finding on a migrated table: %v", f)
		}
	}
	absent, err := New(s.api, Config{Table: "idem-absent-table"})
	if err != nil {
		t.Fatal(err)
	}
	v, findings, err = absent.CheckSchema(ctx)
	if err != nil || v != 0 || len(findings) != 1 || findings[0].Severity != idem.SeverityRefuse {
		t.Fatalf("CheckSchema of an absent table = %d, %v, %v; want one refusing finding", v, findings, err)
	}
	// A table keyed otherwise is refused by Migrate.
	name := newTable()
	_, err = s.api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wrong, _ := New(s.api, Config{Table: name})
	if err := wrong.Migrate(ctx); err == nil {
		t.Fatal("Migrate accepted a table keyed by id")
	}
}

// TestDurabilityWarnsWithoutDeletionProtection: dynalite reports no
// deletion protection; the finding is a warning, never a refusal.
func TestDurabilityWarnsWithoutDeletionProtection(t *testing.T) {
	s := newStore(t, Config{})
	fs, err := s.CheckDurability(context.Background())
	if err != nil || len(fs) != 1 || fs[0].Severity != idem.SeverityWarning || fs[0].Setting != "DeletionProtectionEnabled" {
		t.Fatalf("CheckDurability = %v, %v; want one warning on deletion protection", fs, err)
	}
	eng, err := idem.New(s, idem.Config{})
	if err != nil {
		t.Fatalf("idem.New refused on a warning: %v", err)
	}
	_ = eng.Close()
}

func TestJudgeReplication(t *testing.T) {
	one := judgeReplication("idem", &types.TableDescription{})
	if !one.Safe() || len(one.Findings) != 0 {
		t.Fatalf("one-region table = %+v, want safe without findings", one)
	}
	global := &types.TableDescription{Replicas: []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("eu-west-1")}}}
	rep := judgeReplication("idem", global)
	if rep.Safe() || len(rep.Findings) != 1 || rep.Findings[0].Setting != "Replicas" {
		t.Fatalf("global table (eventual) = %+v, want one refusing finding", rep)
	}
	global.MultiRegionConsistency = types.MultiRegionConsistencyStrong
	if rep := judgeReplication("idem", global); !rep.Safe() || len(rep.Findings) != 1 {
		t.Fatalf("global table (strong) = %+v, want safe with a warning", rep)
	}
}

// TestEngineRefusesGlobalTable: idem.New refuses a store on a global
// table with eventual multi-region consistency unless allowed.
func TestEngineRefusesGlobalTable(t *testing.T) {
	c := testClient(testenv.SharedDynalite(t))
	base := newStoreOn(t, c, Config{})
	g := &globalAPI{API: c}
	s, err := New(g, Config{Table: base.Table()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idem.New(s, idem.Config{}); !errors.Is(err, idem.ErrUnsafeReplication) {
		t.Fatalf("idem.New on a global table = %v, want ErrUnsafeReplication", err)
	}
	eng, err := idem.New(s, idem.Config{AllowAsyncReplication: true})
	if err != nil {
		t.Fatalf("idem.New with AllowAsyncReplication = %v", err)
	}
	_ = eng.Close()
	eng, err = idem.New(base, idem.Config{})
	if err != nil {
		t.Fatalf("idem.New on a one-region table = %v", err)
	}
	_ = eng.Close()
}

// globalAPI answers DescribeTable as for a global table with replicas in
// two regions (dynalite has no global tables); everything else goes to
// the real endpoint.
type globalAPI struct{ API }

func (g *globalAPI) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := g.API.DescribeTable(ctx, in, o...)
	if err == nil && out.Table != nil {
		out.Table.Replicas = []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("eu-west-1")}}
	}
	return out, err
}

// hookedPair returns a migrated store on a fresh table of the shared
// dynalite, and a second store on the same table whose calls go through a
// hookAPI, for tests that act in the gap between a read and a write.
func hookedPair(t *testing.T) (plain, hooked *Store, h *hookAPI) {
	t.Helper()
	c := testClient(testenv.SharedDynalite(t))
	plain = newStoreOn(t, c, Config{})
	h = &hookAPI{API: c}
	hooked, err := New(h, Config{Table: plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	return plain, hooked, h
}
