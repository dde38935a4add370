// Package mutation runs a guard-mutation gate: a list of single edits kept
// in the repository, each removing or breaking one guard of the code, and
// the tests that must notice. A guard that can be removed while every test
// still passes is undefended, and will be refactored away; the gate fails
// on it.
//
// [Run] copies a source tree to a scratch directory once (without .git),
// then for each [Mutation] in turn applies its edit, runs `go test
// -count=1` on the packages it names (with its -run pattern, under a
// timeout), reverts the edit, and reports the mutation as
//
//   - killed: a test failed, as it should;
//   - survived: every test passed with the guard gone;
//   - hung: the tests did not finish within the timeout (a test that hangs
//     on a broken guard instead of failing is a test to fix);
//   - invalid: the text to find is not in the file exactly once, the
//     mutated tree does not compile, the packages do not exist, or the -run
//     pattern matches no test. The list must stay true as the code moves.
//
// Only killed is a pass. The environment is passed on to go test, so
// IDEM_REQUIRE_SERVICES=1 (or a project's own switch) makes service-backed
// tests fail rather than skip.
//
// # The list format
//
// A list is a text file of entries. Each entry starts with an id line;
// lines beginning with # are comments; blank lines separate nothing in
// particular. A field is "name: value" on one line, or "name:" alone
// followed by lines that each begin with "|": the value is the text after
// the "|" of each line, joined by newlines, exactly (tabs included).
//
//	id: engine/replay-fingerprint
//	item: divergence
//	what: a replay no longer compares the request's fingerprint with the record's
//	file: engine.go
//	find:
//	|	if rec.Fingerprint != req.Fingerprint {
//	|		return Result{}, OutcomeMismatch, &MismatchError{Scope: req.Scope, Key: string(req.Key), Record: clonePtr(rec)}
//	|	}
//	|	res := Result{Value: rec.Result, State: rec.State, Replayed: true, Record: *rec}
//	replace:
//	|	res := Result{Value: rec.Result, State: rec.State, Replayed: true, Record: *rec}
//	packages: .
//	run: ^TestReplay
//
// The fields:
//
//   - id (required): unique across the lists.
//   - item (required): the checklist item the mutation attacks — replay,
//     crash, divergence, concurrency, constraint, fencing, retention,
//     observability, scope, or an adapter's own.
//   - what: what the edit breaks, in a sentence.
//   - file (required): the file to edit, slash-separated, relative to the
//     tree's root.
//   - find (required): the text to replace; it must occur in the file
//     exactly once.
//   - replace (required, may be empty): the text put in its place.
//   - packages (required): the packages whose tests must kill the
//     mutation, as go test patterns relative to the root, separated by
//     spaces.
//   - run: a -run pattern, to keep the run short.
//   - timeout: how long the tests may run (a Go duration), when the
//     default does not suit.
//   - env: KEY=VALUE pairs, separated by spaces, added to go test's
//     environment.
//
// The command github.com/idemkit/idem/idemtest/mutation/cmd/mutate runs a
// list from the command line, with a rotating subset for CI (see its
// documentation); the same command runs a list of mutations of your own
// handlers' guards.
package mutation
