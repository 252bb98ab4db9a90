module github.com/ubscore/ubscore

go 1.26

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/tidwall/wal v1.2.1
	golang.org/x/term v0.44.0
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
)
