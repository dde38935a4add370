package dynamostore

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedDynalite()
	os.Exit(code)
}

// testClient is a DynamoDB client for endpoint with fake credentials
// (dynalite checks none).
func testClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "idem-test", SecretAccessKey: "idem-test", Source: "idem tests"}, nil
		}),
	})
}

var tableSeq atomic.Int64

// newTable returns a fresh table name on the shared dynalite.
func newTable() string {
	return fmt.Sprintf("idem-test-%d-%d", os.Getpid(), tableSeq.Add(1))
}

// newStore returns a store on a table of its own, migrated, on the test
// binary's dynalite; the store is closed when the test ends.
func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	c := testClient(testenv.SharedDynalite(t))
	return newStoreOn(t, c, cfg)
}

func newStoreOn(t testing.TB, api API, cfg Config) *Store {
	t.Helper()
	if cfg.Table == "" {
		cfg.Table = newTable()
	}
	s, err := New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
