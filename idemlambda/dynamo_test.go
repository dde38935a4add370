package idemlambda

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem/dynamostore"
	"github.com/idemkit/idem/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedDynalite()
	os.Exit(code)
}

var tables atomic.Int64

// dynamoClient is a client of the test binary's dynalite.
func dynamoClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	return dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(testenv.SharedDynalite(t)),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "idem-test", SecretAccessKey: "idem-test"}, nil
		}),
	})
}

// dynamoStore is a dynamostore on a fresh table of the test's dynalite.
func dynamoStore(t *testing.T, api dynamostore.API) *dynamostore.Store {
	t.Helper()
	st, err := dynamostore.New(api, dynamostore.Config{Table: fmt.Sprintf("idemlambda-%d-%d", os.Getpid(), tables.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// countingAPI counts the item calls a store makes.
type countingAPI struct {
	dynamostore.API
	calls atomic.Int64
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.calls.Add(1)
	return c.API.GetItem(ctx, in, o...)
}

func (c *countingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.calls.Add(1)
	return c.API.PutItem(ctx, in, o...)
}
