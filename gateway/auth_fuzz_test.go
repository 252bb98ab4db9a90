package gateway

// FuzzAuthenticate proves that no header, however mangled, panics the check or
// authenticates unless its token is byte-for-byte one minted with the secret.

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// mintedSet is every token minted for the fuzz run, with the Claims each must
// yield. Minting is deterministic (fixed clock, HMAC), so the set is the same
// in every fuzz worker.
func mintedSet(t testing.TB, a *Authenticator) map[string]Claims {
	m := make(map[string]Claims)
	for _, c := range []struct {
		user  uint64
		admin bool
		ttl   time.Duration
	}{{1, false, time.Hour}, {42, true, time.Hour}, {1<<64 - 1, false, time.Minute}, {7, false, time.Second}} {
		tok, err := a.Mint(c.user, c.admin, c.ttl, testNow)
		if err != nil {
			t.Fatal(err)
		}
		m[tok] = Claims{UserID: c.user, Admin: c.admin, ExpiresAt: testNow.Add(c.ttl)}
	}
	return m
}

func FuzzAuthenticate(f *testing.F) {
	a := newTestAuth(f)
	minted := mintedSet(f, a)
	for tok := range minted {
		for _, h := range []string{"Bearer " + tok, "bearer " + tok, "Bearer  " + tok, "Basic " + tok, tok} {
			f.Add([]byte(h))
		}
		parts := strings.Split(tok, ".")
		for _, mut := range []string{
			tok[:len(tok)-1],                // truncated signature
			tok + "A",                       // extended signature
			parts[0] + "." + parts[1],       // no signature
			parts[0] + "." + parts[1] + ".", // empty signature
			strings.ToUpper(tok),            // case-mangled
			flip(tok, len(parts[0])+3),      // payload bit flip
			flip(tok, len(tok)-1),           // signature bit flip
			rawHS256(`{"alg":"none"}`, decodeSeg(parts[1]), testSecret),
			rawHS256(`{"alg":"HS256"}`, decodeSeg(parts[1]), otherSecret),
		} {
			f.Add([]byte("Bearer " + mut))
		}
	}
	f.Add([]byte(""))
	f.Add([]byte("Bearer "))
	f.Add([]byte("Bearer a.b.c"))
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodHS384, jwt.SigningMethodHS512} {
		tok, _ := jwt.NewWithClaims(m, jwt.MapClaims{"sub": "1", "exp": testNow.Unix() + 60}).SignedString(testSecret)
		f.Add([]byte("Bearer " + tok))
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "1", "exp": testNow.Unix() + 60}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	f.Add([]byte("Bearer " + none))

	f.Fuzz(func(t *testing.T, header []byte) {
		in := bytes.Clone(header)
		c, err := a.AuthenticateAt(header, testNow)
		if !bytes.Equal(in, header) {
			t.Fatal("AuthenticateAt modified its input")
		}
		if err != nil {
			checkUnauthorized(t, c, err)
			return
		}
		tok := string(header[len("Bearer "):])
		want, ok := minted[tok]
		if !ok {
			t.Fatalf("accepted a token that was not minted: %q → %+v", header, c)
		}
		if c != want {
			t.Fatalf("minted token gave %+v, want %+v", c, want)
		}
	})
}

// flip changes one character of s at i to a different base64url character.
func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func decodeSeg(seg string) string {
	b, err := jwt.NewParser().DecodeSegment(seg)
	if err != nil {
		panic(err)
	}
	return string(b)
}
