package dtest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// JUnit XML, in the shape CI systems (Jenkins, GitLab, GitHub actions that
// publish test reports) read: <testsuites> holding a <testsuite> per test
// file holding a <testcase> per test, with a <failure> for a failed test
// and an <error> for an invalid one. Times are in seconds.

// JUnitSuites is the root element.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is the tests of one file.
type JUnitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitCase is one test; a file that could not be read is one case named
// after the file.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *JUnitMessage `xml:"failure,omitempty"`
	Error     *JUnitMessage `xml:"error,omitempty"`
}

// JUnitMessage is a failure or an error: a one-line message and the full
// report as text.
type JUnitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// JUnit returns the run as JUnit XML elements.
func (s *Summary) JUnit() *JUnitSuites {
	root := &JUnitSuites{Name: "dctl test"}
	index := map[string]int{}
	var total time.Duration
	var suiteTime []time.Duration
	for _, r := range s.Results {
		i, ok := index[r.File]
		if !ok {
			i = len(root.Suites)
			index[r.File] = i
			root.Suites = append(root.Suites, JUnitSuite{Name: r.File})
			suiteTime = append(suiteTime, 0)
		}
		suite := &root.Suites[i]
		name := r.Name
		if name == "" {
			name = r.File
		}
		c := JUnitCase{Name: name, Classname: r.File, File: r.File, Time: secondsOnly(r.Duration)}
		switch {
		case r.Err != nil:
			c.Error = &JUnitMessage{Message: firstLine(r.Err.Error()), Type: "invalid", Text: r.Err.Error()}
			suite.Errors++
			root.Errors++
		case len(r.Failures) > 0:
			c.Failure = &JUnitMessage{Message: fmt.Sprintf("%d assertion(s) failed", len(r.Failures)), Type: "assertion",
				Text: strings.Join(r.Failures, "")}
			suite.Failures++
			root.Failures++
		}
		suite.Tests++
		root.Tests++
		suiteTime[i] += r.Duration
		suite.Time = secondsOnly(suiteTime[i])
		total += r.Duration
		suite.Cases = append(suite.Cases, c)
	}
	root.Time = secondsOnly(total)
	return root
}

// WriteJUnit writes the run to w as an XML document of JUnitSuites.
func (s *Summary) WriteJUnit(w io.Writer) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s.JUnit()); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func secondsOnly(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
