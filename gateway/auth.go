package gateway

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Limits and fixed parameters of the bearer-token check.
const (
	// MinSecretLen is the shortest HS256 secret accepted: 32 bytes = the
	// SHA-256 output size (RFC 7518 §3.2 requires a key at least that long).
	MinSecretLen = 32
	// MaxAuthHeaderLen bounds the Authorization value read. A minted token is
	// about 150 bytes; anything near this limit was not minted here.
	MaxAuthHeaderLen = 2048
	// Leeway is the clock skew tolerated on exp and nbf (iat is informational,
	// not checked): a token is still accepted up to 5 s after its exp, to absorb
	// skew between the minting host and this one; small enough that expiry
	// stays meaningful.
	Leeway = 5 * time.Second
	// MaxTokenTTL is the longest lifetime Mint will sign.
	MaxTokenTTL = 366 * 24 * time.Hour
	// RoleAdmin is the role, in the "roles" claim, that /admin/v1 requires.
	RoleAdmin = "admin"
)

// Claims is what a valid token says about its bearer.
type Claims struct {
	UserID    uint64    // from "sub"; always > 0
	Admin     bool      // "roles" contains RoleAdmin
	ExpiresAt time.Time // from "exp" (whole seconds)
}

// Authenticator checks bearer tokens against one HS256 secret. It is safe for
// concurrent use: it holds only the immutable secret.
type Authenticator struct {
	secret []byte // HS256 key, len >= MinSecretLen; a private copy, never logged
}

// NewAuthenticator copies secret; it rejects secrets shorter than MinSecretLen.
func NewAuthenticator(secret []byte) (*Authenticator, error) {
	if len(secret) < MinSecretLen {
		return nil, errors.New("gateway: JWT secret must be at least " + strconv.Itoa(MinSecretLen) + " bytes")
	}
	return &Authenticator{secret: bytes.Clone(secret)}, nil
}

// tokenClaims is the wire form of a token's payload. Unknown claims are ignored;
// a known claim of the wrong JSON type (sub as a number, roles as a string)
// makes the token malformed.
type tokenClaims struct {
	jwt.RegisteredClaims
	Roles []string `json:"roles,omitempty"`
}

// Authenticate checks an Authorization header value at the current time.
func (a *Authenticator) Authenticate(header []byte) (Claims, error) {
	return a.AuthenticateAt(header, time.Now())
}

// AuthenticateAt checks an Authorization header value ("Bearer <JWT>", scheme
// case-insensitive, exactly one space) as of now. The token must be HS256
// signed with the secret (every other alg, "none" included, is rejected before
// the key is used), carry exp (honoured with Leeway) and a "sub" that is a
// canonical decimal uint64 > 0. Every failure is a 401 UNAUTHORIZED whose
// message says why (missing, malformed, bad signature, expired, ...) without
// echoing the token.
func (a *Authenticator) AuthenticateAt(header []byte, now time.Time) (Claims, error) {
	if len(header) == 0 {
		return Claims{}, Unauthorized("missing Authorization header")
	}
	if len(header) > MaxAuthHeaderLen {
		return Claims{}, Unauthorized("Authorization header too long")
	}
	const scheme = "Bearer "
	if len(header) < len(scheme) || !bytes.EqualFold(header[:len(scheme)], []byte(scheme)) {
		return Claims{}, Unauthorized("Authorization scheme must be Bearer")
	}
	raw := header[len(scheme):]
	if len(raw) == 0 {
		return Claims{}, Unauthorized("missing bearer token")
	}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(Leeway),
		jwt.WithStrictDecoding(), // one spelling per signature: no padding-bit variants
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	var tc tokenClaims
	if _, err := p.ParseWithClaims(string(raw), &tc, a.key); err != nil {
		return Claims{}, Unauthorized(jwtReason(err))
	}
	uid, ok := parseUserID(tc.Subject)
	if !ok {
		return Claims{}, Unauthorized("token subject is not a user id")
	}
	c := Claims{UserID: uid, ExpiresAt: tc.ExpiresAt.Time}
	for _, r := range tc.Roles {
		if r == RoleAdmin {
			c.Admin = true
		}
	}
	return c, nil
}

// key is the jwt.Keyfunc. WithValidMethods already pins the alg; checking the
// method type again means a future options change cannot hand the HMAC secret
// to another algorithm.
func (a *Authenticator) key(t *jwt.Token) (any, error) {
	if t.Method != jwt.SigningMethodHS256 {
		return nil, errors.New("gateway: unexpected signing method")
	}
	return a.secret, nil
}

// msgTokenExpired is the message of an expired token's 401.
const msgTokenExpired = "token expired"

// IsTokenExpired says whether err (from Authenticate) refused a token only
// because it has expired: the client should fetch a new one.
func IsTokenExpired(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == CodeUnauthorized && ae.Message == msgTokenExpired
}

// jwtReason maps a jwt error to a fixed message. The library's own text is
// never forwarded: it is not a stable contract.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return msgTokenExpired
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token has no exp claim"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token not valid yet"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "bad token signature or algorithm"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	default:
		return "invalid token"
	}
}

// parseUserID accepts exactly the canonical decimal spelling of a uint64 > 0:
// no sign, no leading zeros, no spaces, no "0x" or "_" (ParseUint rejects those
// with base 10; it would accept leading zeros, hence the first check).
func parseUserID(s string) (uint64, bool) {
	if len(s) == 0 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// Mint signs a token for userID valid from now for ttl: sub, iat, exp and, for
// admin, roles ["admin"]. The `exchange token` command uses it; a user id of 0
// (the fee account) or a ttl outside (0, MaxTokenTTL] is refused.
func (a *Authenticator) Mint(userID uint64, admin bool, ttl time.Duration, now time.Time) (string, error) {
	if userID == 0 {
		return "", errors.New("gateway: cannot mint a token for user 0")
	}
	if ttl <= 0 || ttl > MaxTokenTTL {
		return "", errors.New("gateway: token ttl must be in (0, " + MaxTokenTTL.String() + "]")
	}
	tc := tokenClaims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   strconv.FormatUint(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if admin {
		tc.Roles = []string{RoleAdmin}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, tc).SignedString(a.secret)
}

// RequireAdmin is the /admin/v1 check: 403 FORBIDDEN unless c has RoleAdmin.
func RequireAdmin(c Claims) error {
	if !c.Admin {
		return Forbidden("admin role required")
	}
	return nil
}

// RequireSelf is the /api/v1 ownership check: 403 FORBIDDEN unless the token's
// user is userID. Admins get no exception here; they act through /admin/v1.
func RequireSelf(c Claims, userID uint64) error {
	if c.UserID != userID {
		return Forbidden("token does not belong to this user")
	}
	return nil
}
