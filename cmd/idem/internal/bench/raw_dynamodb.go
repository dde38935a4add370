package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/cmd/idem/internal/storeopen"
)

// DynamoDB: idem's store gets a scratch table <scratch> (created by its
// migration, with its two indexes); the raw side a table <scratch>_raw
// with the primary key alone, claimed by a conditional PutItem
// (attribute_not_exists), recorded by an UpdateItem, read by a strongly
// consistent GetItem — the least a hand-written client would send. Both
// tables are deleted at the end. Against real DynamoDB the tables are
// on-demand (billed per request).
func openDynamoTarget(ctx context.Context, d storeopen.DSN, name string) (*target, error) {
	client, _, err := storeopen.DynamoClient(ctx, d)
	if err != nil {
		return nil, err
	}
	raw := &dynamoRaw{c: client, table: aws.String(name + "_raw")}
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: raw.table, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the raw side's table: %w", err)
	}
	w := dynamodb.NewTableExistsWaiter(client)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: raw.table}, waitTables); err != nil {
		return nil, err
	}
	cleanup := func(ctx context.Context) error {
		var errs []error
		for _, t := range []string{name, name + "_raw"} {
			_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
			var nf *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &nf) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return &target{idemDSN: storeopen.WithDynamoTable(d, name), raw: raw, cleanup: cleanup,
		durability: "DynamoDB (writes acknowledged once stored in several availability zones; dynalite: memory)"}, nil
}

// waitTables bounds the wait for a new table to become active.
const waitTables = 5 * time.Minute

type dynamoRaw struct {
	c     *dynamodb.Client
	table *string
}

func (r *dynamoRaw) insert(ctx context.Context, key string) (bool, error) {
	_, err := r.c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: r.table,
		Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: benchScope + ":" + key},
			"fp": &types.AttributeValueMemberB{Value: benchFingerprint[:]},
			"st": &types.AttributeValueMemberS{Value: "in_progress"},
			"at": &types.AttributeValueMemberS{Value: benchAttempt},
			"ca": &types.AttributeValueMemberN{Value: strconv.FormatInt(nowMicros(), 10)},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return false, nil
	}
	return err == nil, err
}

func (r *dynamoRaw) update(ctx context.Context, key string, result []byte) error {
	_, err := r.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        r.table,
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: benchScope + ":" + key}},
		UpdateExpression: aws.String("SET st = :st, rs = :rs, co = :co"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":st": &types.AttributeValueMemberS{Value: "succeeded"},
			":rs": &types.AttributeValueMemberB{Value: result},
			":co": &types.AttributeValueMemberN{Value: strconv.FormatInt(nowMicros(), 10)},
		},
	})
	return err
}

func (r *dynamoRaw) read(ctx context.Context, key string) (bool, error) {
	out, err := r.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      r.table,
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: benchScope + ":" + key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, err
	}
	return len(out.Item) > 0, nil
}

func (r *dynamoRaw) close() error { return nil }
