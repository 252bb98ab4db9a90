package core

// purity_test.go is a lint that runs as a test (as pebble's internal/lint):
// core must stay a pure, deterministic library (docs/design.md, the rules for core; STYLE "A pure core
// with I/O around it"). It reads every non-test .go file of the package and
// fails, naming the file and line, if one imports a package that brings the
// clock, randomness, I/O, concurrency or anything outside the standard
// library; starts a goroutine or uses a channel; or ranges over a map (whose
// order is random) without saying on that line why the order cannot matter.

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// forbiddenImports may not be imported by core's non-test files. An entry
// ending in "/" forbids every package under it.
var forbiddenImports = []string{
	"time", "time/",
	"math/rand", "math/rand/", "crypto/rand", "hash/maphash", // randomness (maphash: random per-process seed)
	"os", "os/", "net", "net/", "io", "io/", "bufio", "syscall", "log", "log/", "fmt",
	"sync", "sync/", "context", "runtime", "runtime/", "unsafe", "plugin",
}

// modulePath is this module; core may import none of its packages.
const modulePath = "github.com/ubscore/ubscore"

// mapRangeOK marks a map range whose order cannot reach state or output.
const mapRangeOK = "map order does not matter:"

// coreSourceFiles lists the package's non-test .go files, whatever their build tags.
func coreSourceFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if !strings.HasSuffix(n, "_test.go") {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		t.Fatal("no source files found: run from the core directory")
	}
	sort.Strings(out)
	return out
}

// importProblem says why core may not import path, or "" if it may.
func importProblem(path string) string {
	if path == modulePath || strings.HasPrefix(path, modulePath+"/") {
		return "a package of this module (core depends on nothing of ours)"
	}
	if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
		return "outside the standard library"
	}
	for _, f := range forbiddenImports {
		if path == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(path, f)) {
			return "forbidden in the pure core (clock, randomness, I/O or concurrency)"
		}
	}
	return ""
}

func TestCoreImportsArePure(t *testing.T) {
	fset := token.NewFileSet()
	for _, name := range coreSourceFiles(t) {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("%s: %v", fset.Position(imp.Pos()), err)
			}
			if why := importProblem(path); why != "" {
				t.Errorf("%s: core/%s imports %q: %s", fset.Position(imp.Pos()), name, path, why)
			}
		}
	}
}

func TestImportRuleSelf(t *testing.T) {
	for path, bad := range map[string]bool{
		"time": true, "math/rand/v2": true, "net/http": true, "io/fs": true, "log/slog": true, "sync/atomic": true,
		"os/exec": true, "runtime/debug": true, "unsafe": true, "fmt": true, "github.com/x/y": true,
		modulePath + "/journal": true, "pgregory.net/rapid": true,
		"strconv": false, "math/bits": false, "math": false, "errors": false, "encoding/binary": false,
		"crypto/sha256": false, "encoding/hex": false, "iobound": false,
	} {
		if got := importProblem(path) != ""; got != bad {
			t.Errorf("importProblem(%q) forbids=%v, want %v", path, got, bad)
		}
	}
}

// TestCoreHasNoConcurrency: no go statement, no select, no channel type or
// channel operation in core's non-test files.
func TestCoreHasNoConcurrency(t *testing.T) {
	fset := token.NewFileSet()
	for _, name := range coreSourceFiles(t) {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			switch x := n.(type) {
			case *ast.GoStmt:
				what = "go statement"
			case *ast.SelectStmt:
				what = "select"
			case *ast.ChanType:
				what = "channel type"
			case *ast.SendStmt:
				what = "channel send"
			case *ast.UnaryExpr:
				if x.Op == token.ARROW {
					what = "channel receive"
				}
			}
			if what != "" {
				t.Errorf("%s: %s in the single-threaded core", fset.Position(n.Pos()), what)
			}
			return true
		})
	}
}

// TestCoreNoMapRangeOrder type-checks core (once per build-tag set) and fails
// on every range over a map, unless its line carries a comment that begins
// with mapRangeOK and says why the order cannot leak.
func TestCoreNoMapRangeOrder(t *testing.T) {
	for _, tags := range [][]string{nil, {"invariants"}} {
		ctx := build.Default
		ctx.BuildTags = tags
		pkg, err := ctx.ImportDir(".", 0)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		// Type errors (say, an import TestCoreImportsArePure already
		// reports) are collected, not fatal: the ranges that do type-check
		// are still judged. Without any type information there is nothing to judge.
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
		var typeErrs []error
		conf := types.Config{Importer: importer.Default(), Error: func(err error) { typeErrs = append(typeErrs, err) }}
		conf.Check("core", fset, files, info)
		if len(info.Types) == 0 {
			t.Fatalf("type-checking core (tags %v) gave no types: %v", tags, typeErrs)
		}
		if len(typeErrs) > 0 {
			t.Logf("type errors (tags %v), first: %v", tags, typeErrs[0])
		}
		for _, f := range files {
			okLines := map[int]bool{}
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					if strings.Contains(c.Text, mapRangeOK) {
						okLines[fset.Position(c.Pos()).Line] = true
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				rs, ok := n.(*ast.RangeStmt)
				if !ok {
					return true
				}
				typ := info.TypeOf(rs.X)
				if typ == nil {
					return true
				}
				if _, isMap := typ.Underlying().(*types.Map); isMap {
					if pos := fset.Position(rs.Pos()); !okLines[pos.Line] {
						t.Errorf("%s: range over a map (random order); iterate a slice, or add %q and why on that line",
							pos, "// "+mapRangeOK)
					}
				}
				return true
			})
		}
	}
}
