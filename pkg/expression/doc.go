// Package expression implements the dcontroller expression language: a JSON
// value in which single-key maps whose key starts with "@" are operator calls,
// strings starting with "$" are JSONPath queries (RFC 9535) on the subject,
// and everything else is a literal. Parse turns a spec value into an
// Expression once; Eval never re-parses.
package expression
