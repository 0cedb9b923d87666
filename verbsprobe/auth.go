package verbsprobe

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
)

// A responder with a shared secret (auth FILE) serves only clients that
// prove they hold it: it answers a hello with a random nonce, and the
// client with the HMAC-SHA256, under the key, of a label, the nonce and
// its hello line. The key never crosses the wire, a MAC answers one
// challenge only, and it binds the hello (its test and endpoint) it came
// with.

// minKeyLen is the shortest shared secret accepted.
const minKeyLen = 16

// authLabel keeps these MACs apart from any other use of the key.
const authLabel = "grdma probe auth v1\x00"

// LoadKey reads a shared secret from a file: at least 16 bytes (trailing
// white space trimmed), readable by its owner only (chmod 600), as ssh
// insists for private keys.
func LoadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("auth %s is readable by others (mode %#o): chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b := make([]byte, 4097)
	n, err := f.Read(b)
	if err != nil {
		return nil, fmt.Errorf("auth %s: %w", path, err)
	}
	key := bytes.TrimRight(b[:n], " \t\r\n")
	if n > 4096 || len(key) < minKeyLen {
		return nil, fmt.Errorf("auth %s: a shared secret of %d to 4096 bytes, not %d (e.g. head -c 32 /dev/urandom | base64 > %s)", path, minKeyLen, len(key), path)
	}
	return key, nil
}

// authMAC is the client's answer to nonce for its hello line.
func authMAC(key, nonce, hello []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(authLabel))
	m.Write(nonce)
	m.Write(hello)
	return m.Sum(nil)
}

// errAuth is a client that could not prove the shared secret.
var errAuth = errors.New("authentication failed: the peer does not hold this side's shared secret (auth)")

// challenge asks the client that sent hello to prove it holds key.
func challenge(s *session, key, hello []byte) error {
	nonce := make([]byte, 32)
	rand.Read(nonce)
	if err := s.send(wireMessage{Type: msgChallenge, Protocol: ProtocolVersion, Nonce: nonce}); err != nil {
		return err
	}
	m, err := s.readMessage()
	switch {
	case err != nil:
		return fmt.Errorf("no answer to the auth challenge: %w", firstMessageError(err, s.timeout))
	case m.Type != msgAuth:
		return fmt.Errorf("a %q message, not an answer to the auth challenge", m.Type)
	case !hmac.Equal(m.MAC, authMAC(key, nonce, hello)):
		return errAuth
	}
	return nil
}
