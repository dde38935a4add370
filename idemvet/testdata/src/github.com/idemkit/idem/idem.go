// Package idem is a stub of the idem root package for the analyzers' tests.
package idem

import (
	"context"
	"time"
)

type Key string

type Fingerprint [32]byte

func NewFingerprint(b []byte) Fingerprint { return Fingerprint{} }

func ParseKey(s string) (Key, error) { return Key(s), nil }

func DeriveKey(namespace string, version int, parts ...string) (Key, error) { return "", nil }

func MustDeriveKey(namespace string, version int, parts ...string) Key { return "" }

type Request struct {
	Scope       string
	Key         Key
	Fingerprint Fingerprint
	Operation   string
}

type Config struct {
	TTL   time.Duration
	Cover map[string]time.Duration
	Lease time.Duration
}

type Engine struct{}

type Store interface{}

func New(s Store, c Config) (*Engine, error) { return &Engine{}, nil }

type Attempt struct{}

func (a *Attempt) ForwardKey() string { return "" }

type Result struct{ Replayed bool }

func Do[T any](ctx context.Context, e *Engine, req Request, fn func(ctx context.Context, a *Attempt) (T, error)) (T, Result, error) {
	var zero T
	return zero, Result{}, nil
}
