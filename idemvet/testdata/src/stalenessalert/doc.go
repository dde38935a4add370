// Package stalenessalert holds rule files for the analyzer's tests.
package stalenessalert
