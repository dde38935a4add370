package jsonschema

type Schema struct {
	Type       string
	Properties map[string]*Schema
	Required   []string
}
