package expression

import "strings"

// rewriteDashNames rewrites dotted member names that contain a hyphen
// (`$.metadata.labels.app-name`, `$..node-role`) into RFC 9535 name
// selectors (`$.metadata.labels['app-name']`). RFC 9535's member-name
// shorthand has no hyphen, but Kubernetes label and annotation keys are
// full of them, and kubectl's and Δ-controller's JSONPath accept them in
// dotted form. RFC 9535 has no subtraction, so a hyphen after a dotted name
// has no other meaning. A name starts after "." or ".." with a letter, "_"
// or a non-ASCII byte and runs over letters, digits, "_", "-" and non-ASCII
// bytes; text inside string literals is left as it is.
func rewriteDashNames(text string) string {
	if !strings.Contains(text, "-") {
		return text
	}
	var out strings.Builder
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\'' || c == '"':
			j := stringEnd(text, i)
			out.WriteString(text[i:j])
			i = j
		case c == '.':
			j := i + 1
			if j < len(text) && text[j] == '.' {
				j++
			}
			if j >= len(text) || !isNameFirst(text[j]) {
				out.WriteString(text[i:j])
				i = j
				continue
			}
			k := j
			for k < len(text) && (isNameFirst(text[k]) || isDigit(text[k]) || text[k] == '-') {
				k++
			}
			name := text[j:k]
			if !strings.Contains(name, "-") {
				out.WriteString(text[i:k])
			} else {
				if j-i == 2 {
					out.WriteString("..") // descendant segment
				}
				out.WriteString("['")
				out.WriteString(name)
				out.WriteString("']")
			}
			i = k
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

func isNameFirst(c byte) bool {
	return c == '_' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
