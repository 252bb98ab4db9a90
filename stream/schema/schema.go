// Package schema is the JSON Schema (2020-12) of the WebSocket protocol of
// GET /ws (package stream, docs/streams.md): messages.json, whose
// $defs/server are the server's messages and $defs/client a client's. The
// tests that read streams validate every message they receive against it
// (Check), as the HTTP answers are validated against the OpenAPI document,
// so a message cannot change shape without the document.
package schema

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Messages is messages.json.
//
//go:embed messages.json
var Messages []byte

const id = "https://ubscore.example/ws/messages.json"

var (
	once           sync.Once
	server, client *jsonschema.Schema
	loadErr        error
)

func load() {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Messages))
	if err != nil {
		loadErr = fmt.Errorf("schema: messages.json: %w", err)
		return
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, doc); err != nil {
		loadErr = err
		return
	}
	if server, loadErr = c.Compile(id + "#/$defs/server"); loadErr != nil {
		return
	}
	client, loadErr = c.Compile(id + "#/$defs/client")
}

// Check validates a message the server sent.
func Check(msg []byte) error { return check(msg, func() *jsonschema.Schema { return server }) }

// CheckClient validates a message a client sends.
func CheckClient(msg []byte) error { return check(msg, func() *jsonschema.Schema { return client }) }

func check(msg []byte, s func() *jsonschema.Schema) error {
	once.Do(load)
	if loadErr != nil {
		return loadErr
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(msg))
	if err != nil {
		return fmt.Errorf("schema: not JSON: %w: %.200q", err, msg)
	}
	if err := s().Validate(v); err != nil {
		return fmt.Errorf("schema: %.300s does not match stream/schema/messages.json: %v", msg, err)
	}
	return nil
}
