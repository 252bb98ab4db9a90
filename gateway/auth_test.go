package gateway

// These tests prove that only an HS256 token signed with the secret, unexpired
// (within Leeway) and with a canonical numeric sub authenticates; that every
// other token is a 401 whose fixed message names the reason (so it cannot echo
// the token or secret); and that the admin and ownership checks are 403s.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef") // exactly MinSecretLen
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
	testNow     = time.Unix(1_700_000_000, 0)
)

func newTestAuth(t testing.TB) *Authenticator {
	t.Helper()
	a, err := NewAuthenticator(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustMint(t testing.TB, a *Authenticator, user uint64, admin bool) string {
	t.Helper()
	tok, err := a.Mint(user, admin, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawHS256 signs header.payload (raw JSON, base64url-encoded here) with key, so
// tests control every byte of both.
func rawHS256(header, payload string, key []byte) string {
	enc := base64.RawURLEncoding
	text := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(text))
	return text + "." + enc.EncodeToString(m.Sum(nil))
}

// claimsToken is an HS256 token with the secret and the given payload JSON.
func claimsToken(payload string) string {
	return rawHS256(`{"alg":"HS256","typ":"JWT"}`, payload, testSecret)
}

// exp is a payload with sub and exp = testNow + d.
func exp(sub string, d time.Duration) string {
	return `{"sub":"` + sub + `","exp":` + itoa(testNow.Add(d).Unix()) + `}`
}

func itoa(v int64) string { return FormatUnits(v, 0) }

func signWith(t *testing.T, m jwt.SigningMethod, key any) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(m, jwt.MapClaims{"sub": "42", "exp": testNow.Add(time.Hour).Unix()}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestNewAuthenticatorSecret(t *testing.T) {
	for _, s := range [][]byte{nil, {}, testSecret[:MinSecretLen-1]} {
		if _, err := NewAuthenticator(s); err == nil {
			t.Errorf("secret of %d bytes accepted", len(s))
		}
	}
	secret := append([]byte(nil), testSecret...)
	a, err := NewAuthenticator(secret)
	if err != nil {
		t.Fatal(err)
	}
	tok := mustMint(t, a, 42, false)
	secret[0] ^= 0xff // the caller's slice is not the key
	if _, err := a.AuthenticateAt([]byte("Bearer "+tok), testNow); err != nil {
		t.Fatalf("token no longer verifies after the caller changed its slice: %v", err)
	}
}

func TestMint(t *testing.T) {
	a := newTestAuth(t)
	for _, c := range []struct {
		user uint64
		ttl  time.Duration
	}{{0, time.Hour}, {1, 0}, {1, -time.Second}, {1, MaxTokenTTL + time.Second}} {
		if _, err := a.Mint(c.user, false, c.ttl, testNow); err == nil {
			t.Errorf("Mint(%d, ttl %v) succeeded", c.user, c.ttl)
		}
	}
	for _, admin := range []bool{false, true} {
		tok := mustMint(t, a, 42, admin)
		got, err := a.AuthenticateAt([]byte("Bearer "+tok), testNow)
		want := Claims{UserID: 42, Admin: admin, ExpiresAt: testNow.Add(time.Hour)}
		if err != nil || got != want {
			t.Errorf("admin=%v: got %+v, %v; want %+v", admin, got, err, want)
		}
	}
	if _, err := a.Mint(1, false, MaxTokenTTL, testNow); err != nil {
		t.Errorf("Mint at MaxTokenTTL: %v", err)
	}
}

// TestAuthenticateRealClock covers Authenticate, which reads time.Now.
func TestAuthenticateRealClock(t *testing.T) {
	a := newTestAuth(t)
	tok, err := a.Mint(7, false, time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := a.Authenticate([]byte("Bearer " + tok)); err != nil || c.UserID != 7 {
		t.Fatalf("got %+v, %v", c, err)
	}
	old, _ := a.Mint(7, false, time.Minute, time.Now().Add(-time.Hour))
	if _, err := a.Authenticate([]byte("Bearer " + old)); !strings.Contains(err.Error(), "expired") {
		t.Fatalf("hour-old token: %v", err)
	}
}

func TestAuthenticateTable(t *testing.T) {
	a := newTestAuth(t)
	tok := mustMint(t, a, 42, false)
	admin := mustMint(t, a, 42, true)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	none := signWith(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType)
	hs256Payload := `{"sub":"42","exp":` + itoa(testNow.Add(time.Hour).Unix()) + `}`
	// A token whose header says none but which carries a valid HS256 signature.
	noneWithSig := rawHS256(`{"alg":"none"}`, hs256Payload, testSecret)
	parts := strings.Split(tok, ".")
	// user 43's payload under user 42's signature
	tampered := parts[0] + "." + strings.Split(mustMint(t, a, 43, false), ".")[1] + "." + parts[2]
	sig := []byte(parts[2])
	sig[len(sig)-1] = paddingVariant(sig[len(sig)-1])

	ok := func(c Claims) *Claims { return &c }
	inHour := testNow.Add(time.Hour)
	for _, c := range []struct {
		name   string
		header string
		want   *Claims // nil: expect 401 with reason in msg
		msg    string
	}{
		{"valid", "Bearer " + tok, ok(Claims{42, false, inHour}), ""},
		{"valid admin", "Bearer " + admin, ok(Claims{42, true, inHour}), ""},
		{"scheme lower case", "bearer " + tok, ok(Claims{42, false, inHour}), ""},
		{"scheme upper case", "BEARER " + tok, ok(Claims{42, false, inHour}), ""},
		{"missing header", "", nil, "missing Authorization"},
		{"scheme only", "Bearer", nil, "scheme"},
		{"empty token", "Bearer ", nil, "missing bearer token"},
		{"wrong scheme", "Basic " + tok, nil, "scheme"},
		{"no scheme", tok, nil, "scheme"},
		{"two spaces", "Bearer  " + tok, nil, "malformed"},
		{"tab", "Bearer\t" + tok, nil, "scheme"},
		{"trailing space", "Bearer " + tok + " ", nil, "malformed"},
		{"too long", "Bearer " + tok + strings.Repeat("A", MaxAuthHeaderLen), nil, "too long"},
		{"garbage", "Bearer garbage", nil, "malformed"},
		{"two segments", "Bearer " + parts[0] + "." + parts[1], nil, "malformed"},
		{"four segments", "Bearer " + tok + ".x", nil, "malformed"},
		{"no signature", "Bearer " + parts[0] + "." + parts[1] + ".", nil, "signature"},
		{"padded signature", "Bearer " + tok + "=", nil, "malformed"},
		{"signature padding bits", "Bearer " + parts[0] + "." + parts[1] + "." + string(sig), nil, "malformed"},
		{"tampered payload", "Bearer " + tampered, nil, "signature"},
		{"alg none", "Bearer " + none, nil, "signature or algorithm"},
		{"alg none with HS256 signature", "Bearer " + noneWithSig, nil, "signature or algorithm"},
		{"alg lower case", "Bearer " + rawHS256(`{"alg":"hs256"}`, hs256Payload, testSecret), nil, "signature or algorithm"},
		{"alg missing", "Bearer " + rawHS256(`{"typ":"JWT"}`, hs256Payload, testSecret), nil, "signature or algorithm"},
		{"HS384 same secret", "Bearer " + signWith(t, jwt.SigningMethodHS384, testSecret), nil, "signature or algorithm"},
		{"HS512 same secret", "Bearer " + signWith(t, jwt.SigningMethodHS512, testSecret), nil, "signature or algorithm"},
		{"RS256", "Bearer " + signWith(t, jwt.SigningMethodRS256, rsaKey), nil, "signature or algorithm"},
		{"ES256", "Bearer " + signWith(t, jwt.SigningMethodES256, ecKey), nil, "signature or algorithm"},
		{"wrong secret", "Bearer " + rawHS256(`{"alg":"HS256"}`, hs256Payload, otherSecret), nil, "signature"},
		{"header not JSON", "Bearer " + rawHS256(`{"alg":"HS256"`, hs256Payload, testSecret), nil, "malformed"},
		{"payload not JSON", "Bearer " + claimsToken(`{"sub":"42"`), nil, "malformed"},
		{"expired", "Bearer " + claimsToken(exp("42", -Leeway-time.Second)), nil, "expired"},
		{"expired within leeway", "Bearer " + claimsToken(exp("42", -Leeway+time.Second)), ok(Claims{42, false, testNow.Add(-Leeway + time.Second)}), ""},
		{"exp now", "Bearer " + claimsToken(exp("42", 0)), ok(Claims{42, false, testNow}), ""},
		{"no exp", "Bearer " + claimsToken(`{"sub":"42"}`), nil, "no exp"},
		{"exp null", "Bearer " + claimsToken(`{"sub":"42","exp":null}`), nil, "no exp"},
		{"exp string", "Bearer " + claimsToken(`{"sub":"42","exp":"tomorrow"}`), nil, "malformed"},
		{"nbf future", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"nbf":9999999000}`), nil, "not valid yet"},
		{"sub missing", "Bearer " + claimsToken(`{"exp":9999999999}`), nil, "subject"},
		{"sub empty", "Bearer " + claimsToken(exp("", time.Hour)), nil, "subject"},
		{"sub non-numeric", "Bearer " + claimsToken(exp("alice", time.Hour)), nil, "subject"},
		{"sub negative", "Bearer " + claimsToken(exp("-42", time.Hour)), nil, "subject"},
		{"sub plus", "Bearer " + claimsToken(exp("+42", time.Hour)), nil, "subject"},
		{"sub zero", "Bearer " + claimsToken(exp("0", time.Hour)), nil, "subject"},
		{"sub leading zero", "Bearer " + claimsToken(exp("042", time.Hour)), nil, "subject"},
		{"sub space", "Bearer " + claimsToken(exp(" 42", time.Hour)), nil, "subject"},
		{"sub trailing space", "Bearer " + claimsToken(exp("42 ", time.Hour)), nil, "subject"},
		{"sub hex", "Bearer " + claimsToken(exp("0x2a", time.Hour)), nil, "subject"},
		{"sub underscore", "Bearer " + claimsToken(exp("4_2", time.Hour)), nil, "subject"},
		{"sub decimal point", "Bearer " + claimsToken(exp("42.0", time.Hour)), nil, "subject"},
		{"sub max uint64", "Bearer " + claimsToken(exp("18446744073709551615", time.Hour)), ok(Claims{1<<64 - 1, false, inHour}), ""},
		{"sub huge", "Bearer " + claimsToken(exp("18446744073709551616", time.Hour)), nil, "subject"},
		{"sub JSON number", "Bearer " + claimsToken(`{"sub":42,"exp":9999999999}`), nil, "malformed"},
		{"roles user", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"roles":["user"]}`), ok(Claims{42, false, time.Unix(9999999999, 0)}), ""},
		{"roles Admin", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"roles":["Admin"]}`), ok(Claims{42, false, time.Unix(9999999999, 0)}), ""},
		{"roles both", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"roles":["user","admin"]}`), ok(Claims{42, true, time.Unix(9999999999, 0)}), ""},
		{"roles null", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"roles":null}`), ok(Claims{42, false, time.Unix(9999999999, 0)}), ""},
		{"roles string", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"roles":"admin"}`), nil, "malformed"},
		{"roles numbers", "Bearer " + claimsToken(`{"sub":"42","exp":9999999999,"roles":[1]}`), nil, "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := a.AuthenticateAt([]byte(c.header), testNow)
			if c.want != nil {
				if err != nil || got != *c.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, *c.want)
				}
				return
			}
			checkUnauthorized(t, got, err)
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q does not say %q", err, c.msg)
			}
		})
	}
}

// authMessages is every message a 401 may carry. Each is a fixed string, so
// none can echo the token or the secret.
var authMessages = map[string]bool{
	"missing Authorization header":        true,
	"Authorization header too long":       true,
	"Authorization scheme must be Bearer": true,
	"missing bearer token":                true,
	"token expired":                       true,
	"token has no exp claim":              true,
	"token not valid yet":                 true,
	"bad token signature or algorithm":    true,
	"malformed token":                     true,
	"invalid token":                       true,
	"token subject is not a user id":      true,
}

// checkUnauthorized asserts a 401 UNAUTHORIZED with zero Claims and one of the
// fixed messages.
func checkUnauthorized(t *testing.T, got Claims, err error) {
	t.Helper()
	e, ok := AsAPIError(err)
	if !ok || e.Status != 401 || e.Code != CodeUnauthorized || got != (Claims{}) {
		t.Fatalf("got %+v, %v; want 401 UNAUTHORIZED", got, err)
	}
	if !authMessages[e.Message] {
		t.Fatalf("401 message %q is not one of the fixed messages", e.Message)
	}
}

// paddingVariant returns a base64url character that decodes to the same bytes
// as c in the last position of a 32-byte signature (43 characters: the last
// one carries 2 data bits and 4 padding bits) but has non-zero padding bits.
func paddingVariant(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	return alphabet[strings.IndexByte(alphabet, c)|1]
}

// TestAuthenticateConcurrent lets the race detector see one Authenticator used
// from many goroutines, as the server's handlers will.
func TestAuthenticateConcurrent(t *testing.T) {
	a := newTestAuth(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := uint64(g*100 + i + 1)
				tok, err := a.Mint(id, i%2 == 0, time.Hour, testNow)
				if err != nil {
					t.Error(err)
					return
				}
				if c, err := a.AuthenticateAt([]byte("Bearer "+tok), testNow); err != nil || c.UserID != id {
					t.Errorf("got %+v, %v; want user %d", c, err, id)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkAuthenticate(b *testing.B) {
	a := newTestAuth(b)
	h := []byte("Bearer " + mustMint(b, a, 42, true))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.AuthenticateAt(h, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
