// Package storekit holds, in its subpackages, the building blocks idem's
// own stores share beyond the [idem.Store] contract — and a third-party
// store may use them too. They are public, versioned with the root module
// and documented, so that a store module never reaches into another
// module's internal packages (a store at one version and the root at
// another would then stop compiling):
//
//   - claimmix: the claim-path mix (read first while duplicates dominate,
//     the claim statement straight away while first-time claims do);
//   - commitqueue: group commit's queue (callers submit, one goroutine
//     gathers batches, each caller is answered after its batch commits);
//   - migration: embedded, numbered SQL migrations, loaded, checked and
//     applied in order under the store's lock;
//   - schemacheck: a SQL store's schema (table, unique constraint on
//     (scope, key), version) judged into [idem.Finding] values;
//   - sqlcodec: times as Unix microseconds and byte slices as nullable
//     columns, for database/sql stores;
//   - statecode: the one-byte state codes of compact record formats;
//   - listorder: the order of [idem.Store.List] for stores that sort in Go.
//
// A store's conformance is proven by package storetest, whatever it is
// built from.
package storekit
