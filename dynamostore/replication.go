package dynamostore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem"
)

var _ idem.ReplicationChecker = (*Store)(nil)

// CheckReplication reads the table's replicas (DescribeTable) and judges
// whether a failover can lose a claim the store acknowledged.
//
// A table in one region keeps every acknowledged write on storage in
// several availability zones: nothing to find. A global table with
// replicas in other regions and the default multi-region eventual
// consistency replicates asynchronously, last writer wins: a claim
// acknowledged in one region is not yet in the others, so a failover (or
// a client of another region) claims the same key again and runs the
// effect twice — refused, unless the engine is told
// Config.AllowAsyncReplication. A global table with multi-region strong
// consistency (MRSC) acknowledges a write only once another region holds
// it, and conditional writes are decided across regions: a warning that
// says so (each claim then costs a cross-region round trip).
func (s *Store) CheckReplication(ctx context.Context) (idem.Replication, error) {
	if err := s.check(); err != nil {
		return idem.Replication{}, err
	}
	out, err := s.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table})
	if err != nil {
		return idem.Replication{}, fmt.Errorf("dynamostore: describing table %s: %w", *s.table, err)
	}
	return judgeReplication(*s.table, out.Table), nil
}

// judgeReplication judges a table's description.
func judgeReplication(table string, t *types.TableDescription) idem.Replication {
	if t == nil || len(t.Replicas) == 0 {
		return idem.Replication{Topology: "DynamoDB table " + table + " in one region (writes kept in several availability zones)"}
	}
	regions := make([]string, 0, len(t.Replicas))
	for _, r := range t.Replicas {
		regions = append(regions, aws.ToString(r.RegionName))
	}
	sort.Strings(regions)
	topo := fmt.Sprintf("DynamoDB global table %s, replicas in %s, %s multi-region consistency",
		table, strings.Join(regions, ", "), strings.ToLower(string(consistency(t))))
	if consistency(t) == types.MultiRegionConsistencyStrong {
		return idem.Replication{Topology: topo, Findings: []idem.Finding{{
			Setting: "MultiRegionConsistency", Value: "STRONG",
			Problem:  "claims are decided across regions and survive a regional failover; each claim and outcome costs a cross-region round trip",
			Fix:      "none needed; keep the engine's timeouts above the cross-region latency",
			Severity: idem.SeverityWarning,
		}}}
	}
	return idem.Replication{Topology: topo, Findings: []idem.Finding{{
		Setting: "Replicas", Value: strings.Join(regions, ", ") + " (MultiRegionConsistency EVENTUAL)",
		Problem: "a global table replicates between regions asynchronously, last writer wins: a claim acknowledged in one region " +
			"is not yet in the others, so after a regional failover (or from a client in another region) the same key is claimed again and the effect runs twice",
		Fix:      "keep idem's table in one region (a table of its own, not a global table), or create it with multi-region strong consistency (MRSC)",
		Severity: idem.SeverityRefuse,
	}}}
}

// consistency is the table's multi-region consistency; a global table
// that does not say is eventually consistent (the only mode before MRSC).
func consistency(t *types.TableDescription) types.MultiRegionConsistency {
	if t.MultiRegionConsistency == "" {
		return types.MultiRegionConsistencyEventual
	}
	return t.MultiRegionConsistency
}

var _ idem.DurabilityChecker = (*Store)(nil)

// CheckDurability reads the table (DescribeTable). DynamoDB keeps every
// acknowledged write in several availability zones and evicts nothing, so
// nothing refuses; a table without deletion protection is a warning: one
// DeleteTable (a stack torn down by mistake) drops every record, and
// every finished key then runs again.
func (s *Store) CheckDurability(ctx context.Context) ([]idem.Finding, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	out, err := s.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: describing table %s: %w", *s.table, err)
	}
	if out.Table != nil && aws.ToBool(out.Table.DeletionProtectionEnabled) {
		return nil, nil
	}
	return []idem.Finding{{
		Setting: "DeletionProtectionEnabled", Value: "false",
		Problem:  "one DeleteTable (a stack torn down by mistake) drops every record, and each finished key then runs its effect again on its next retry",
		Fix:      "aws dynamodb update-table --table-name " + *s.table + " --deletion-protection-enabled (and point-in-time recovery for the records)",
		Severity: idem.SeverityWarning,
	}}, nil
}
