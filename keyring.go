package idem

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// Encryption at rest. With Config.Encryption set, the engine seals every
// recorded response (Record.Result) and intent journal (Record.Intent) with
// AES-256-GCM before it is written, and opens them when a record is read.
// Keys, scopes and fingerprints are not encrypted: the store looks records
// up by them, and they are the caller's identifiers or hashes already.
//
// A sealed value is an envelope inside the stored bytes, so no store needs
// a schema change:
//
//	magic "\x00idem\xe1" | version 1 | len(keyID) | keyID | nonce (12) | ciphertext+tag
//
// The key id lets keys rotate: a [Keyring] seals with its current key and
// opens with any key it holds. The additional data binds each ciphertext to
// its record and field (scope, key, result or intent), so a ciphertext
// copied onto another record, or into the other field, does not open.

// Errors of encryption at rest. An [*OpenError] matches
// ErrRecordUnreadable and one of the others.
var (
	// ErrRecordUnreadable: a recorded value could not be opened. The
	// record is left as it is; the engine never treats it as absent and
	// never runs the effect again because of it.
	ErrRecordUnreadable = errors.New("idem: recorded value cannot be decrypted")
	// ErrUnknownKey: the value was sealed with a key id the keyring does
	// not hold (or there is no keyring). Add the key to the keyring as an
	// old key.
	ErrUnknownKey = errors.New("idem: recorded value is encrypted with a key this keyring does not hold")
	// ErrTampered: the ciphertext does not authenticate under its key: it
	// was altered, truncated, or moved from another record or field.
	ErrTampered = errors.New("idem: recorded value does not authenticate (altered, truncated or moved)")
	// ErrBadKeyring: a keyring or key file is malformed.
	ErrBadKeyring = errors.New("idem: bad keyring")
)

// OpenError says which recorded value could not be opened and why.
type OpenError struct {
	Scope, Key string
	// Field is "result" or "intent".
	Field string
	// KeyID is the key id the envelope names ("" if it is too short to
	// name one).
	KeyID string
	// Err is ErrUnknownKey or ErrTampered.
	Err error
}

func (e *OpenError) Error() string {
	if errors.Is(e.Err, ErrUnknownKey) {
		return fmt.Sprintf("idem: record %s: %s is encrypted with key id %q, which the keyring does not hold (add it as an old key)",
			hashForLog(e.Scope, e.Key), e.Field, e.KeyID)
	}
	return fmt.Sprintf("idem: record %s: %s under key id %q: %v", hashForLog(e.Scope, e.Key), e.Field, e.KeyID, e.Err)
}

// Unwrap returns ErrRecordUnreadable and the specific cause.
func (e *OpenError) Unwrap() []error { return []error{ErrRecordUnreadable, e.Err} }

// EncryptionKey is one AES-256 key of a [Keyring].
type EncryptionKey struct {
	// ID names the key in every value it seals: 1 to 64 bytes of
	// letters, digits, '-', '_' and '.'.
	ID string
	// Secret is the 32-byte AES-256 key. Generate it with crypto/rand.
	Secret []byte
}

// Keyring holds the keys of encryption at rest: one current key that seals
// new values and any number of old keys that still open values sealed
// before a rotation. It is immutable and safe for concurrent use. A nil
// *Keyring seals nothing and opens only plaintext.
type Keyring struct {
	currentID string
	current   cipher.AEAD
	byID      map[string]cipher.AEAD
	ids       []string
}

// NewKeyring returns a keyring that seals with current and opens values
// sealed with current or any of old. Key ids must be distinct.
//
// To rotate: deploy NewKeyring(newKey, oldKey) everywhere; records written
// from then on use newKey, and records written before keep opening with
// oldKey until they have expired (after the TTL; unknown records never
// expire, so keep the old key while any remain).
func NewKeyring(current EncryptionKey, old ...EncryptionKey) (*Keyring, error) {
	k := &Keyring{byID: make(map[string]cipher.AEAD, 1+len(old))}
	for i, ek := range append([]EncryptionKey{current}, old...) {
		if err := validKeyID(ek.ID); err != nil {
			return nil, err
		}
		if len(ek.Secret) != 32 {
			return nil, fmt.Errorf("%w: key %q is %d bytes, want 32 (AES-256)", ErrBadKeyring, ek.ID, len(ek.Secret))
		}
		if _, dup := k.byID[ek.ID]; dup {
			return nil, fmt.Errorf("%w: key id %q appears twice", ErrBadKeyring, ek.ID)
		}
		block, err := aes.NewCipher(ek.Secret)
		if err != nil {
			return nil, fmt.Errorf("%w: key %q: %v", ErrBadKeyring, ek.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%w: key %q: %v", ErrBadKeyring, ek.ID, err)
		}
		k.byID[ek.ID] = aead
		k.ids = append(k.ids, ek.ID)
		if i == 0 {
			k.currentID, k.current = ek.ID, aead
		}
	}
	return k, nil
}

// ParseKeyring reads a key file: one key per line, "ID:BASE64", where
// BASE64 is the standard (padded) base64 of 32 random bytes. The first key
// is the current one, the others are old keys. Blank lines and lines
// starting with '#' are ignored. Generate a key with
//
//	echo "k2026-12:$(head -c 32 /dev/urandom | base64)"
func ParseKeyring(data []byte) (*Keyring, error) {
	var keys []EncryptionKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%w: line %d: want ID:BASE64", ErrBadKeyring, n)
		}
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: key %q is not base64: %v", ErrBadKeyring, n, id, err)
		}
		keys = append(keys, EncryptionKey{ID: strings.TrimSpace(id), Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key (want lines ID:BASE64, the first is the current key)", ErrBadKeyring)
	}
	return NewKeyring(keys[0], keys[1:]...)
}

func validKeyID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("%w: key id %q must be 1 to 64 bytes", ErrBadKeyring, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: key id %q may hold only letters, digits, '-', '_' and '.'", ErrBadKeyring, id)
		}
	}
	return nil
}

// CurrentID returns the id of the key that seals new values.
func (k *Keyring) CurrentID() string {
	if k == nil {
		return ""
	}
	return k.currentID
}

// IDs returns the key ids the keyring holds, the current one first.
func (k *Keyring) IDs() []string {
	if k == nil {
		return nil
	}
	return append([]string(nil), k.ids...)
}

// envelope layout.
const (
	sealMagic   = "\x00idem\xe1"
	sealVersion = 1
	nonceSize   = 12
)

// Record fields a value is sealed for; part of the additional data.
const (
	fieldResult = 'r'
	fieldIntent = 'i'
)

// Sealed reports whether b is an encrypted envelope (as opposed to a
// plaintext value recorded without encryption).
func Sealed(b []byte) bool {
	return len(b) > len(sealMagic) && string(b[:len(sealMagic)]) == sealMagic
}

// SealedKeyID returns the key id named by the envelope b, and false when b
// is not one.
func SealedKeyID(b []byte) (string, bool) {
	if !Sealed(b) || len(b) < len(sealMagic)+2 {
		return "", false
	}
	n := int(b[len(sealMagic)+1])
	if len(b) < len(sealMagic)+2+n {
		return "", false
	}
	return string(b[len(sealMagic)+2 : len(sealMagic)+2+n]), true
}

// SealResult returns the envelope recording plaintext as the result of
// the record (scope, key). A nil keyring, and an empty plaintext, return
// plaintext unchanged. Tools that write a result to a store directly (not
// through an [Engine] with Config.Encryption) use it.
func (k *Keyring) SealResult(scope, key string, plaintext []byte) ([]byte, error) {
	return k.seal(fieldResult, scope, key, plaintext)
}

// SealIntent is [Keyring.SealResult] for the intent journal.
func (k *Keyring) SealIntent(scope, key string, plaintext []byte) ([]byte, error) {
	return k.seal(fieldIntent, scope, key, plaintext)
}

func (k *Keyring) seal(field byte, scope, key string, plaintext []byte) ([]byte, error) {
	if k == nil || len(plaintext) == 0 {
		return plaintext, nil
	}
	id := k.currentID
	hdr := len(sealMagic) + 2 + len(id)
	out := make([]byte, hdr+nonceSize, hdr+nonceSize+len(plaintext)+k.current.Overhead())
	copy(out, sealMagic)
	out[len(sealMagic)] = sealVersion
	out[len(sealMagic)+1] = byte(len(id))
	copy(out[len(sealMagic)+2:], id)
	nonce := out[hdr : hdr+nonceSize]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("idem: sealing a recorded value: %w", err)
	}
	return k.current.Seal(out, nonce, plaintext, additionalData(out[:hdr], field, scope, key)), nil
}

// additionalData binds a ciphertext to its header, record and field.
func additionalData(hdr []byte, field byte, scope, key string) []byte {
	ad := make([]byte, 0, len(hdr)+2+len(scope)+len(key))
	ad = append(ad, hdr...)
	ad = append(ad, field)
	ad = append(ad, scope...)
	ad = append(ad, 0)
	return append(ad, key...)
}

// OpenResult returns the plaintext of a recorded result of (scope, key):
// b itself when it is not sealed, its decryption when it is.
func (k *Keyring) OpenResult(scope, key string, b []byte) ([]byte, error) {
	return k.open(fieldResult, scope, key, b)
}

// OpenIntent is [Keyring.OpenResult] for the intent journal.
func (k *Keyring) OpenIntent(scope, key string, b []byte) ([]byte, error) {
	return k.open(fieldIntent, scope, key, b)
}

func (k *Keyring) open(field byte, scope, key string, b []byte) ([]byte, error) {
	if !Sealed(b) {
		return b, nil
	}
	name := "result"
	if field == fieldIntent {
		name = "intent"
	}
	id, ok := SealedKeyID(b)
	if !ok || b[len(sealMagic)] != sealVersion {
		return nil, &OpenError{Scope: scope, Key: key, Field: name, KeyID: id, Err: ErrTampered}
	}
	var aead cipher.AEAD
	if k != nil {
		aead = k.byID[id]
	}
	if aead == nil {
		return nil, &OpenError{Scope: scope, Key: key, Field: name, KeyID: id, Err: ErrUnknownKey}
	}
	hdr := len(sealMagic) + 2 + len(id)
	if len(b) < hdr+nonceSize+aead.Overhead() {
		return nil, &OpenError{Scope: scope, Key: key, Field: name, KeyID: id, Err: ErrTampered}
	}
	plain, err := aead.Open(nil, b[hdr:hdr+nonceSize], b[hdr+nonceSize:], additionalData(b[:hdr], field, scope, key))
	if err != nil {
		return nil, &OpenError{Scope: scope, Key: key, Field: name, KeyID: id, Err: ErrTampered}
	}
	return plain, nil
}

// OpenRecord replaces r's sealed Result and Intent with their plaintext,
// in place; plaintext values are left as they are. Tools that read a store
// directly (not through an [Engine]) call it on every record they show.
// On error r is unchanged. A nil keyring opens nothing: a sealed value
// then gives ErrUnknownKey.
func (k *Keyring) OpenRecord(r *Record) error {
	res, err := k.OpenResult(r.Scope, r.Key, r.Result)
	if err != nil {
		return err
	}
	in, err := k.OpenIntent(r.Scope, r.Key, r.Intent)
	if err != nil {
		return err
	}
	r.Result, r.Intent = res, in
	return nil
}

// LoadKeyring reads a key file in [ParseKeyring]'s format. It refuses a
// file that other users may read, write or search (any "other"
// permission bit set; on Unix-like systems): the keys are as secret as
// the records they protect. Make it 0600 or 0400 (0640 with a group of
// its own, e.g. a Kubernetes secret mounted with defaultMode 0440).
func LoadKeyring(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("%w: %s is accessible to other users (mode %v); chmod o= %s", ErrBadKeyring, path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	k, err := ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
