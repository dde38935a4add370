// Package ok holds rule files that pass.
package ok
