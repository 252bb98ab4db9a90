package core

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// cloneCheck follows a property stream from a mid-point with two clones of
// the processor: live applies every later command (its events must equal
// the original's), frozen applies none (it must still serialize to the
// mid-point's bytes at the end: nothing the original or live wrote reached
// it).
type cloneCheck struct {
	live, frozen *Processor
	snap         []byte
}

func (k *cloneCheck) start(p *Processor, snap []byte) error {
	k.live, k.frozen, k.snap = p.Clone(), p.Clone(), snap
	if !bytes.Equal(k.live.AppendSnapshot(nil), snap) {
		return fmt.Errorf("a clone serializes differently from its original")
	}
	return nil
}

func (k *cloneCheck) apply(c *Command, ev []Event) error {
	if k.live == nil {
		return nil
	}
	if kev := k.live.Apply(c); !slices.Equal(ev, kev) {
		return fmt.Errorf("the clone diverged at %s", firstEventDiff(ev, kev))
	}
	return nil
}

func (k *cloneCheck) end(p *Processor) error {
	if hp, hk := p.StateHash(), k.live.StateHash(); hp != hk {
		return fmt.Errorf("final hash %s, the clone's %s", hp, hk)
	}
	if !bytes.Equal(k.frozen.AppendSnapshot(nil), k.snap) {
		return fmt.Errorf("a clone left alone no longer serializes to the mid-point's state: it shares memory the original or the other clone wrote")
	}
	if v := k.frozen.CheckInvariants(); len(v) != 0 {
		return fmt.Errorf("the clone left alone breaks invariants: %+v", v)
	}
	return nil
}

// TestCloneSharesNothing builds a state that fills every table of the
// processor (spot and binary markets, freed order slots, client ids, ops,
// balances past the inline assets, sparse user ids, p2p users, transfers
// pending and done), clones it and walks both: no slice, map or pointer of
// the clone may be the original's. Every reference-typed field of the
// processor's types must be non-empty somewhere in the state (else the walk
// could not see it aliased), except the few listed in notCovered: a field
// added later fails here until the state fills it and Clone copies it.
func TestCloneSharesNothing(t *testing.T) {
	seed := uint64(7)
	g := newGen(seed, propProfile())
	p := New(Config{})
	users := make([]UserID, len(g.users))
	for i := range g.users {
		users[i] = g.users[i].id
	}
	bg := newBinGen(seed, p, users)
	r := rand.New(rand.NewPCG(seed, 9))
	var c Command
	for i := 0; i < 30_000; i++ {
		if i >= g.setupLen() && r.IntN(100) < 40 {
			bg.next(&c)
			g.seq++
			c.Seq, c.Time = g.seq, g.time
		} else {
			g.next(&c)
		}
		ev := p.Apply(&c)
		g.observe(ev)
		bg.observe(ev)
	}
	// A user id past the dense table (userIndex.sparse), and a balance of an
	// asset past the inline ones (balExt).
	for _, c := range []Command{
		{Kind: KindSpotDeposit, User: userDenseLimit + 5, Asset: 1, Amount: 10, Key: g.newKey("sparse")},
		{Kind: KindConfigAsset, Asset: inlineAssets + 2, BaseScale: 2},
		{Kind: KindSpotDeposit, User: users[0], Asset: inlineAssets + 2, Amount: 10, Key: g.newKey("ext")},
	} {
		g.seq++
		c.Seq, c.Time = g.seq, g.time
		if ev := p.Apply(&c); ev[len(ev)-1].Code != OK {
			t.Fatalf("%v: %v", c.Kind, ev[len(ev)-1].Code)
		}
	}
	snap := p.AppendSnapshot(nil)
	k := p.Clone()
	if !bytes.Equal(k.AppendSnapshot(nil), snap) {
		t.Fatal("the clone serializes differently")
	}
	w := aliasWalk{filled: map[string]bool{}}
	w.walk(reflect.ValueOf(p).Elem(), reflect.ValueOf(k).Elem(), "Processor")
	for _, a := range w.aliased {
		t.Errorf("the clone shares %s with the original", a)
	}
	// Scratch that Clone resets, and what a test-sized state cannot fill.
	notCovered := map[string]string{
		"Processor.events":                         "Apply's scratch: the clone starts with none",
		"Processor.chk.acct":                       "the full check's buffers: the clone starts with none",
		"Processor.chk.heldExt":                    "the full check's buffers: the clone starts with none",
		"Processor.markets[].bin.posIdx.far.slots": "accounts past 65536 hold no position here; the same idMap.clone as userIdx.sparse",
	}
	var missing []string
	refPaths(reflect.TypeOf(Processor{}), "Processor", map[reflect.Type]bool{}, func(path string) {
		if !w.filled[path] && notCovered[path] == "" {
			missing = append(missing, path)
		}
	})
	if len(missing) != 0 {
		t.Errorf("the state leaves these references empty, so the walk cannot tell whether Clone copies them; fill them, or list them in notCovered with why:\n%s",
			strings.Join(missing, "\n"))
	}
	// And the copy stands alone: mutate the original, the clone keeps its state.
	for i := 0; i < 2_000; i++ {
		g.next(&c)
		g.observe(p.Apply(&c))
	}
	if !bytes.Equal(k.AppendSnapshot(nil), snap) {
		t.Fatal("commands applied to the original changed the clone")
	}
}

// aliasWalk compares an original (a) and its clone (b) field by field.
type aliasWalk struct {
	aliased []string
	filled  map[string]bool // type paths (indexes as []) seen holding a non-empty reference
}

func (w *aliasWalk) walk(a, b reflect.Value, path string) {
	switch a.Kind() {
	case reflect.Pointer:
		if w.distinct(a, b, path, a.IsNil()) {
			w.walk(a.Elem(), b.Elem(), path)
		}
	case reflect.Slice:
		if w.distinct(a, b, path, a.Cap() == 0) && hasRefs(a.Type().Elem()) {
			for i := 0; i < a.Len(); i++ {
				w.walk(a.Index(i), b.Index(i), path+"[]")
			}
		}
	case reflect.Map:
		if w.distinct(a, b, path, a.Len() == 0) && hasRefs(a.Type().Elem()) {
			for it := a.MapRange(); it.Next(); {
				w.walk(it.Value(), b.MapIndex(it.Key()), path+"[]")
			}
		}
	case reflect.Array:
		if hasRefs(a.Type().Elem()) {
			for i := 0; i < a.Len(); i++ {
				w.walk(a.Index(i), b.Index(i), path+"[]")
			}
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			w.walk(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
		}
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		w.aliased = append(w.aliased, path+" (a "+a.Kind().String()+": Clone cannot copy it)")
	}
}

// distinct records the reference a at path (filled, unless empty) and
// whether the clone's b is the same one; it reports whether to look inside.
func (w *aliasWalk) distinct(a, b reflect.Value, path string, empty bool) bool {
	if empty {
		return false
	}
	w.filled[path] = true
	if a.Pointer() == b.Pointer() {
		w.aliased = append(w.aliased, path)
		return false
	}
	return true
}

// hasRefs reports whether values of t hold a slice, map or pointer (strings
// are immutable: a clone shares them on purpose).
func hasRefs(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasRefs(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasRefs(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// refPaths calls fn with the type path of every reference inside t (as
// aliasWalk names them; strings left out).
func refPaths(t reflect.Type, path string, seen map[reflect.Type]bool, fn func(string)) {
	switch t.Kind() {
	case reflect.Pointer:
		fn(path)
		if !seen[t] {
			seen[t] = true
			refPaths(t.Elem(), path, seen, fn)
			delete(seen, t)
		}
	case reflect.Slice, reflect.Map:
		fn(path)
		refPaths(t.Elem(), path+"[]", seen, fn)
	case reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		fn(path)
	case reflect.Array:
		refPaths(t.Elem(), path+"[]", seen, fn)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			refPaths(t.Field(i).Type, path+"."+t.Field(i).Name, seen, fn)
		}
	}
}

// TestSnapshotPaced: a paced serialization and hash are the plain ones',
// byte for byte, and yield about once per paceBytes of output (per MB
// hashed): what lets the state follower share the Ps while it serializes.
func TestSnapshotPaced(t *testing.T) {
	seed := uint64(11)
	g := newGen(seed, propProfile())
	p := New(Config{})
	var c Command
	for i := 0; i < 20_000; i++ {
		g.next(&c)
		g.observe(p.Apply(&c))
	}
	for u := UserID(0); u < 40_000; u++ { // many accounts: a state of several paceBytes
		g.seq++
		c := Command{Kind: KindSpotDeposit, Seq: g.seq, Time: g.time, User: 100_000 + u, Asset: 1, Amount: 5, Key: g.newKey("pace")}
		if ev := p.Apply(&c); ev[len(ev)-1].Code != OK {
			t.Fatalf("deposit: %v", ev[len(ev)-1].Code)
		}
	}
	plain := p.AppendSnapshot(nil)
	if len(plain) < 4*paceBytes {
		t.Fatalf("the state serializes to %d bytes: too small to see the pace", len(plain))
	}
	yields := 0
	paced := p.AppendSnapshotPaced([]byte("prefix"), func() { yields++ })
	if !bytes.Equal(paced[len("prefix"):], plain) {
		t.Fatal("the paced serialization differs from AppendSnapshot's")
	}
	if want := len(plain) / paceBytes; yields < want-1 || yields > want+1 {
		t.Errorf("%d yields over %d bytes, want about %d (one per %d bytes)", yields, len(plain), want, paceBytes)
	}
	big := bytes.Repeat(plain, 8)
	yields = 0
	if got, want := StateHashOfPaced(big, func() { yields++ }), StateHashOf(big); got != want {
		t.Fatalf("paced hash %s, plain %s", got, want)
	}
	if want := (len(big) + 1<<20 - 1) >> 20; yields != want {
		t.Errorf("%d yields hashing %d bytes, want %d (one per MB)", yields, len(big), want)
	}
	if StateHashOf(nil) != StateHashOfPaced(nil, nil) || p.StateHash() != StateHashOf(plain) {
		t.Fatal("StateHash is not the hash of the serialization")
	}
}
