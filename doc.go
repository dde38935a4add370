// Package idem gives software exactly-once effects on top of at-least-once
// delivery.
//
// A caller retries because the outcome of its last try was unknown. idem makes
// that retry harmless: the effect runs at most once per intent, every
// duplicate gets the recorded outcome, and what could not be decided is kept
// as evidence (state [StateUnknown]) for reconciliation.
//
// The root package is the vocabulary: [Key], [Scope]-qualified records,
// [Fingerprint], [State], the [Store] contract and the [Engine] that drives a
// claim → effect → record cycle. It depends only on the standard library.
// Store backends live in their own packages (memstore, sqlitestore, pgstore,
// …), so a program that imports the core and one backend builds nothing else.
//
// The state machine:
//
//	   claim (absent, or expired past retention)
//	        │
//	        ▼
//	  ┌─────────────┐  complete(fence) ┌───────────┐
//	  │ in_progress │ ───────────────▶ │ succeeded │
//	  └─────────────┘                  └───────────┘
//	    │   │    │     fail(fence)     ┌───────────┐
//	    │   │    └───────────────────▶ │  failed   │
//	    │   │                          └───────────┘
//	    │   │ release(fence): no effect happened
//	    │   └──────────────▶ (row deleted; the key can be claimed again)
//	    │ lease expired / panic / timeout / crash
//	    ▼
//	┌─────────┐  resolve (recovery hook, reconciliation, operator)
//	│ unknown │ ─────────────────────────▶ succeeded | failed | released
//	└─────────┘
package idem
