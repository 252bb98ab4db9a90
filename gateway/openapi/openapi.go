// Package openapi holds the OpenAPI 3.1 document of the gateway's HTTP API
// (openapi.json), which GET /openapi.json answers. It is the reference a
// client is generated from and the one every answer of the tests is checked
// against (gateway/openapitest): a route, a status or a field the server
// gains without the document fails them. Edit openapi.json by hand; its
// schemas are closed (additionalProperties: false).
package openapi

import _ "embed"

// Document is openapi.json.
//
//go:embed openapi.json
var Document []byte
