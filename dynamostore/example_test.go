package dynamostore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostore"
)

// Open a store on a table. In a Lambda function, build the client from
// config.LoadDefaultConfig (github.com/aws/aws-sdk-go-v2/config), once, at
// init; the store makes no request until used.
func Example() {
	client := dynamodb.New(dynamodb.Options{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}})
	st, err := dynamostore.New(client, dynamostore.Config{Table: "idem-records"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	fmt.Println("table:", st.Table())

	// Then, once, at deploy time: st.Migrate(ctx) creates the table and
	// its indexes; at start, idem.New(st, idem.Config{}) checks the
	// table's replication and refuses a global table that can lose
	// claims.
	_ = func(ctx context.Context) (*idem.Engine, error) {
		if err := st.Migrate(ctx); err != nil {
			return nil, err
		}
		return idem.New(st, idem.Config{})
	}
	// Output: table: idem-records
}

// A misspelt table name is refused before any request is made.
func ExampleNew_badTable() {
	_, err := dynamostore.New(dynamodb.New(dynamodb.Options{}), dynamostore.Config{Table: "idem records"})
	fmt.Println(err)
	// Output: dynamostore: bad config: Config.Table "idem records": byte 4 may not appear in a table name (a-z, A-Z, 0-9, '_', '-', '.')
}
