// Package object holds helpers for schemaless Kubernetes objects
// (unstructured.Unstructured): keys, deep copies in the JSON data model,
// JSON merge patches (RFC 7386) and the field paths a patch sets.
package object
