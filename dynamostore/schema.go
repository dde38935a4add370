package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idem"
)

// SchemaVersion is the version of the table layout this store writes
// (attributes, key and indexes), reported by CheckSchema.
const SchemaVersion = 1

// tableInput is the table Migrate creates.
func (s *Store) tableInput() *dynamodb.CreateTableInput { return CreateTableInput(*s.table) }

// CreateTableInput is the table [Store.Migrate] creates, for teams that
// create tables with their own tools (CloudFormation, Terraform, `aws
// dynamodb create-table --cli-input-json`): on-demand capacity, the
// primary key pk (S), and the global secondary indexes idem-state-age
// (gs HASH, ca RANGE; all attributes) and idem-expiry (xs HASH, ex RANGE;
// keys only). Enable TTL on the attribute ttl as well.
func CreateTableInput(table string) *dynamodb.CreateTableInput {
	attr := func(name string, t types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: t}
	}
	key := func(name string, t types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: t}
	}
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			attr(attrPK, types.ScalarAttributeTypeS), attr(attrStateShard, types.ScalarAttributeTypeS),
			attr(attrCreated, types.ScalarAttributeTypeN), attr(attrExpiryShard, types.ScalarAttributeTypeS),
			attr(attrExpires, types.ScalarAttributeTypeN),
		},
		KeySchema: []types.KeySchemaElement{key(attrPK, types.KeyTypeHash)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String(IndexStateAge),
			KeySchema:  []types.KeySchemaElement{key(attrStateShard, types.KeyTypeHash), key(attrCreated, types.KeyTypeRange)},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}, {
			IndexName:  aws.String(IndexExpiry),
			KeySchema:  []types.KeySchemaElement{key(attrExpiryShard, types.KeyTypeHash), key(attrExpires, types.KeyTypeRange)},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}
}

// Migrate creates the table with its indexes (on-demand capacity) when it
// does not exist, waits until it is active, and turns on TTL on the ttl
// attribute. On an existing table it creates nothing and checks it as
// CheckSchema does, failing on a refusing finding. An endpoint without
// the TTL API (dynalite) leaves TTL off: Sweep still removes expired
// records, and CheckSchema says so.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	_, err := s.api.CreateTable(ctx, s.tableInput())
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
	case err != nil:
		return fmt.Errorf("dynamostore: creating table %s: %w", *s.table, err)
	}
	if err := s.waitActive(ctx); err != nil {
		return err
	}
	_, err = s.api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               s.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil && !unsupported(err) && !ttlAlreadyOn(err) {
		return fmt.Errorf("dynamostore: enabling TTL on %s: %w", *s.table, err)
	}
	_, findings, err := s.CheckSchema(ctx)
	if err != nil {
		return err
	}
	for _, f := range findings {
		if f.Severity == idem.SeverityRefuse {
			return fmt.Errorf("dynamostore: table %s exists but does not fit: %s", *s.table, f)
		}
	}
	return nil
}

// unsupported reports whether err says the endpoint has no such
// operation (dynalite has no UpdateTimeToLive).
func unsupported(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "UnknownOperationException" || ae.ErrorCode() == "UnrecognizedClientException")
}

// ttlAlreadyOn reports whether UpdateTimeToLive refused because TTL is
// already enabled (DynamoDB answers a repeat with a ValidationException).
func ttlAlreadyOn(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}

// waitActive polls DescribeTable until the table and its indexes are
// active, for at most 5 minutes or until ctx ends.
func (s *Store) waitActive(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, err := s.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table})
		if err != nil {
			return fmt.Errorf("dynamostore: describing table %s: %w", *s.table, err)
		}
		if active(out.Table) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dynamostore: table %s not active after 5 minutes", *s.table)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func active(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// CheckSchema reads the table (DescribeTable, DescribeTimeToLive) and
// reports what does not fit the store: a missing table, another primary
// key, a missing or differently keyed index (refused: claims or listings
// would go wrong), and TTL not enabled on the ttl attribute (a warning:
// Sweep still removes expired records, at the cost of its writes). The
// version is SchemaVersion when the table fits.
func (s *Store) CheckSchema(ctx context.Context) (version int, findings []idem.Finding, err error) {
	if err := s.check(); err != nil {
		return 0, nil, err
	}
	out, err := s.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return 0, []idem.Finding{{
			Setting: "table", Value: *s.table + " absent",
			Problem: "there is no table to keep records in", Fix: "run idem migrate --store dynamodb://" + *s.table,
			Severity: idem.SeverityRefuse,
		}}, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("dynamostore: describing table %s: %w", *s.table, err)
	}
	findings = s.judgeTable(out.Table)
	ttl, err := s.api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: s.table})
	switch {
	case err != nil && !unsupported(err):
		return 0, nil, fmt.Errorf("dynamostore: reading TTL of %s: %w", *s.table, err)
	case err != nil || ttl.TimeToLiveDescription == nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled ||
		aws.ToString(ttl.TimeToLiveDescription.AttributeName) != attrTTL:
		v := "disabled"
		if err == nil && ttl.TimeToLiveDescription != nil {
			v = string(ttl.TimeToLiveDescription.TimeToLiveStatus)
			if a := aws.ToString(ttl.TimeToLiveDescription.AttributeName); a != "" {
				v += " on " + a
			}
		}
		findings = append(findings, idem.Finding{
			Setting: "TimeToLive", Value: v,
			Problem:  "DynamoDB does not delete expired records by itself: only the sweeper (idem sweep) removes them, and each delete is a billed write",
			Fix:      "aws dynamodb update-time-to-live --table-name " + *s.table + " --time-to-live-specification Enabled=true,AttributeName=ttl",
			Severity: idem.SeverityWarning,
		})
	}
	for _, f := range findings {
		if f.Severity == idem.SeverityRefuse {
			return 0, findings, nil
		}
	}
	return SchemaVersion, findings, nil
}

// judgeTable compares a table's key and indexes with tableInput's.
func (s *Store) judgeTable(t *types.TableDescription) []idem.Finding {
	want := s.tableInput()
	var out []idem.Finding
	if !sameKeys(t.KeySchema, want.KeySchema) {
		out = append(out, idem.Finding{
			Setting: "KeySchema", Value: keysString(t.KeySchema),
			Problem:  "the table's primary key is not pk (HASH): the conditional puts that decide who owns a key would not be keyed by (scope, key)",
			Fix:      "create a table of its own for idem with idem migrate",
			Severity: idem.SeverityRefuse,
		})
	}
	for _, g := range want.GlobalSecondaryIndexes {
		var found *types.GlobalSecondaryIndexDescription
		for i := range t.GlobalSecondaryIndexes {
			if aws.ToString(t.GlobalSecondaryIndexes[i].IndexName) == *g.IndexName {
				found = &t.GlobalSecondaryIndexes[i]
			}
		}
		switch {
		case found == nil:
			out = append(out, idem.Finding{
				Setting: "GlobalSecondaryIndex " + *g.IndexName, Value: "absent",
				Problem:  "listing (idem list, recovery, reconciliation) or sweeping would fail: they read this index, never scan the table",
				Fix:      "create the index as docs/dynamodb.md shows, or a new table with idem migrate",
				Severity: idem.SeverityRefuse,
			})
		case !sameKeys(found.KeySchema, g.KeySchema):
			out = append(out, idem.Finding{
				Setting: "GlobalSecondaryIndex " + *g.IndexName, Value: keysString(found.KeySchema),
				Problem:  "the index is keyed otherwise than the store queries it",
				Fix:      "recreate the index as " + keysString(g.KeySchema),
				Severity: idem.SeverityRefuse,
			})
		}
	}
	return out
}

func sameKeys(a, b []types.KeySchemaElement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if aws.ToString(a[i].AttributeName) != aws.ToString(b[i].AttributeName) || a[i].KeyType != b[i].KeyType {
			return false
		}
	}
	return true
}

func keysString(ks []types.KeySchemaElement) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += aws.ToString(k.AttributeName) + " " + string(k.KeyType)
	}
	return s
}
