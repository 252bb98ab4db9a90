package persist

import (
	"errors"
	"testing"
)

// TestVenueIdentity: a primary's data dir gets a WAL id, a standby's adopts
// the venue's (the log's) and keeps it, and a data dir of another venue
// refuses the log.
func TestVenueIdentity(t *testing.T) {
	primary, standby := t.TempDir(), t.TempDir()
	v, _, err := VenueIdentity(primary, true)
	if err != nil || len(v) != 32 {
		t.Fatalf("primary: %q, %v", v, err)
	}
	if again, _, _ := VenueIdentity(primary, true); again != v {
		t.Fatalf("the primary's id changed: %s then %s", v, again)
	}
	s, adopt, err := VenueIdentity(standby, false)
	if err != nil || s != "" {
		t.Fatalf("standby before the log: %q, %v", s, err)
	}
	if err := adopt(v); err != nil {
		t.Fatal(err)
	}
	if err := adopt(v); err != nil {
		t.Fatalf("adopting the same venue twice: %v", err)
	}
	if s, _, _ = VenueIdentity(standby, false); s != v {
		t.Fatalf("the standby holds %q, want the venue %s", s, v)
	}
	if id, err := LoadOrCreateWALID(standby); err != nil || id != v {
		t.Fatalf("the standby's sink would use %q (%v), want %s", id, err, v)
	}
	other, _, _ := VenueIdentity(t.TempDir(), true)
	if err := adopt(other); !errors.Is(err, ErrOtherVenue) {
		t.Fatalf("a log of another venue: %v", err)
	}
	if err := adopt("short"); err == nil {
		t.Fatal("a malformed venue id was adopted")
	}
}
