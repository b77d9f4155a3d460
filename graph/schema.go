package graph

import _ "embed"

// Schema is the JSON Schema (2020-12) of the topology file.
//
//go:embed topology.schema.json
var Schema []byte
