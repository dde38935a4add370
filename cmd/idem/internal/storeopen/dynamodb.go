package storeopen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamostore"
)

// DynamoDB DSNs:
//
//	dynamodb://TABLE[?region=eu-west-1][&endpoint=http://127.0.0.1:8000][&ttl_grace=1h][&index_shards=8]
//
// Credentials and, without region=, the region come from the AWS SDK's
// default chain (environment, shared config and credentials files, SSO,
// the container's or instance's role). endpoint= points at another
// DynamoDB endpoint (DynamoDB Local, dynalite); on a loopback endpoint
// a chain that finds no credentials falls back to fixed placeholder ones,
// which such local servers do not check. ttl_grace and index_shards set
// dynamostore.Config.TTLGrace and IndexShards. `idem migrate` creates the
// table, its two indexes and its TTL; `idem migrate --print` prints the
// CreateTable request as JSON (aws dynamodb create-table --cli-input-json).

type dynamoDSN struct {
	cfg      dynamostore.Config
	region   string
	endpoint string
}

func parseDynamo(d DSN) (dynamoDSN, error) {
	table, query, _ := strings.Cut(d.Target, "?")
	if table == "" {
		return dynamoDSN{}, errors.New("no table; write dynamodb://TABLE?region=REGION")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return dynamoDSN{}, fmt.Errorf("query: %w", err)
	}
	out := dynamoDSN{cfg: dynamostore.Config{Table: table}, region: q.Get("region"), endpoint: q.Get("endpoint")}
	for k := range q {
		switch k {
		case "region", "endpoint":
		case "ttl_grace":
			g, err := time.ParseDuration(q.Get(k))
			if err != nil || g <= 0 {
				return dynamoDSN{}, fmt.Errorf("ttl_grace=%q: want a positive duration (1h)", q.Get(k))
			}
			out.cfg.TTLGrace = g
		case "index_shards":
			n, err := strconv.Atoi(q.Get(k))
			if err != nil || n < 1 {
				return dynamoDSN{}, fmt.Errorf("index_shards=%q: want a count of 1 or more", q.Get(k))
			}
			out.cfg.IndexShards = n
		default:
			return dynamoDSN{}, fmt.Errorf("unknown parameter %q (want region, endpoint, ttl_grace, index_shards)", k)
		}
	}
	if out.endpoint != "" {
		u, err := url.Parse(out.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return dynamoDSN{}, fmt.Errorf("endpoint=%q: want http://host:port or https://host", out.endpoint)
		}
	}
	// New validates the table and the rest without a request.
	if _, err := dynamostore.New(dynamodb.New(dynamodb.Options{}), out.cfg); err != nil {
		return dynamoDSN{}, err
	}
	return out, nil
}

func checkDynamo(d DSN) error {
	_, err := parseDynamo(d)
	return err
}

func openDynamo(ctx context.Context, d DSN, opt Options) (idem.Store, error) {
	dd, err := parseDynamo(d)
	if err != nil {
		return nil, err
	}
	client, err := dynamoClient(ctx, dd)
	if err != nil {
		return nil, err
	}
	st, err := dynamostore.New(client, dd.cfg)
	if err != nil {
		return nil, err
	}
	if opt.Migrate {
		if err := st.Migrate(ctx); err != nil {
			return nil, err
		}
	} else if opt.MustExist {
		if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(dd.cfg.Table)}); err != nil {
			return nil, fmt.Errorf("table %s: %w (create it with idem migrate)", dd.cfg.Table, err)
		}
	}
	return st, nil
}

// DynamoClient returns a DynamoDB client for a dynamodb:// DSN, configured
// as idem's store is (region, endpoint, credentials), and the DSN's table.
// It makes no request.
func DynamoClient(ctx context.Context, d DSN) (*dynamodb.Client, string, error) {
	dd, err := parseDynamo(d)
	if err != nil {
		return nil, "", err
	}
	c, err := dynamoClient(ctx, dd)
	return c, dd.cfg.Table, err
}

func dynamoClient(ctx context.Context, dd dynamoDSN) (*dynamodb.Client, error) {
	var loads []func(*config.LoadOptions) error
	if dd.region != "" {
		loads = append(loads, config.WithRegion(dd.region))
	}
	local := dd.endpoint != "" && loopbackURL(dd.endpoint)
	if local {
		// A loopback endpoint is a local DynamoDB: never ask the
		// instance metadata service (a network call off this host) for
		// credentials it would not check.
		loads = append(loads, config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
			config.WithCredentialsProvider(localCredentials{}))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if dd.endpoint == "" {
			return nil, errors.New("no AWS region: add region= to the DSN or set AWS_REGION")
		}
		awsCfg.Region = "us-east-1" // a local endpoint ignores it, the signer needs one
	}
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if dd.endpoint != "" {
			o.BaseEndpoint = aws.String(dd.endpoint)
		}
	}), nil
}

// WithDynamoTable returns the dynamodb:// DSN d naming another table.
func WithDynamoTable(d DSN, table string) string {
	_, q, ok := strings.Cut(d.Target, "?")
	s := "dynamodb://" + table
	if ok {
		s += "?" + q
	}
	return s
}

// dynamoMigrations prints the CreateTable request migrate sends.
func dynamoMigrations(d DSN) (string, error) {
	dd, err := parseDynamo(d)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(dynamostore.CreateTableInput(dd.cfg.Table))
	if err != nil {
		return "", err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", err
	}
	b, err = json.MarshalIndent(pruneJSON(v), "", "  ")
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}

// pruneJSON drops the members the SDK's structs leave null or empty, so
// the request reads as a person (or aws dynamodb create-table
// --cli-input-json) would write it.
func pruneJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			x = pruneJSON(x)
			if x == nil || x == "" {
				delete(v, k)
				continue
			}
			v[k] = x
		}
	case []any:
		for i, x := range v {
			v[i] = pruneJSON(x)
		}
	}
	return v
}

func loopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// localCredentials are those of the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY), or placeholders: a loopback DynamoDB (DynamoDB
// Local, dynalite) checks none, and the rest of the SDK's chain (instance
// metadata, SSO) would reach off this host.
type localCredentials struct{}

func (localCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}, nil
	}
	return aws.Credentials{AccessKeyID: "idem-local", SecretAccessKey: "idem-local", Source: "idem: loopback endpoint"}, nil
}
