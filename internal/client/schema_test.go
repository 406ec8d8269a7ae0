package client

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/openapi"
)

// TestTypesMatchTheOpenAPIDocument keeps the client's result types in step
// with the API: every property of a schema is a field of its type, and every
// field a property.
func TestTypesMatchTheOpenAPIDocument(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document(), &doc))
	types := map[string]any{
		"UploadResult":      UploadResult{},
		"FileMetadata":      File{},
		"Replica":           Replica{},
		"FileList":          FileList{},
		"DeleteResult":      DeleteResult{},
		"CopyCheck":         CopyCheck{},
		"VerifyResult":      VerifyResult{},
		"Node":              Node{},
		"RegisterRequest":   RegisterRequest{},
		"Ring":              RingInfo{},
		"RingShare":         RingShare{},
		"RingPoint":         RingPoint{},
		"ZoneShare":         ZoneShare{},
		"PlacementRequest":  PlacementRequest{},
		"Operation":         Operation{},
		"RebalanceReport":   RebalanceReport{},
		"DrainReport":       DrainReport{},
		"DeregisterResult":  DeregisterResult{},
		"DrainPlan":         DrainPlan{},
		"DrainTarget":       DrainTarget{},
		"RunProgress":       RunProgress{},
		"ComponentState":    ComponentState{},
		"NodeCounts":        NodeCounts{},
		"HealthReport":      HealthReport{},
		"NodeHealth":        NodeHealth{},
		"HealthCheckResult": HealthCheckResult{},
		"DurabilityReport":  DurabilityReport{},
		"NodeRisk":          NodeRisk{},
		"ZoneRisk":          ZoneRisk{},
		"Chunk":             Chunk{},
		"ChunkVerify":       ChunkVerify{},
		"UploadSession":     UploadSession{},
		"UploadPart":        UploadPart{},
		"UploadDetail":      UploadDetail{},
		"ScrubReport":       ScrubReport{},
		"NodeScrub":         NodeScrub{},
		"ScrubPassReport":   ScrubPassReport{},
	}
	for schema, v := range types {
		t.Run(schema, func(t *testing.T) {
			s, ok := doc.Components.Schemas[schema]
			require.True(t, ok, "the document has no schema %s", schema)
			var want []string
			for name := range s.Properties {
				want = append(want, name)
			}
			slices.Sort(want)
			require.Equal(t, want, jsonFields(reflect.TypeOf(v)))
		})
	}
}

// jsonFields lists the JSON names of a struct's encoded fields, sorted; an
// embedded struct without a name of its own contributes its fields, as
// encoding/json flattens them.
func jsonFields(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			names = append(names, jsonFields(f.Type)...)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
