// Package natsstore is an idem.Store on a NATS JetStream key-value bucket.
package natsstore
