package sharding

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// memberLeaseName is the name of identity's member Lease in ring.
func memberLeaseName(ring, identity string) string { return ring + "-member-" + identity }

// bucketLeaseName is the name of bucket b's Lease in ring (two digits).
func bucketLeaseName(ring string, b int) string { return fmt.Sprintf("%s-bucket-%02d", ring, b) }

// Lease roles (values of LabelRole).
const (
	roleMember = "member"
	roleBucket = "bucket"
)

// complete fills the defaults of o and checks it. Errors name the field.
func (o Options) complete() (Options, error) {
	if o.Client == nil {
		return o, errors.New("sharding: Options.Client is required")
	}
	if o.Namespace == "" {
		return o, errors.New("sharding: Options.Namespace is required")
	}
	if o.Ring == "" {
		o.Ring = DefaultRing
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.LeaseDuration < 0 || o.RenewDeadline < 0 || o.RetryPeriod < 0 {
		return o, errors.New("sharding: LeaseDuration, RenewDeadline and RetryPeriod must be positive")
	}
	if o.RenewDeadline >= o.LeaseDuration {
		return o, fmt.Errorf("sharding: RenewDeadline (%s) must be shorter than LeaseDuration (%s)", o.RenewDeadline, o.LeaseDuration)
	}
	if o.MaxPeerLeaseDuration == 0 {
		o.MaxPeerLeaseDuration = DefaultMaxPeerLeaseFactor * o.LeaseDuration
	}
	if o.MaxPeerLeaseDuration < o.LeaseDuration {
		return o, fmt.Errorf("sharding: MaxPeerLeaseDuration (%s) must not be shorter than LeaseDuration (%s)", o.MaxPeerLeaseDuration, o.LeaseDuration)
	}
	if o.RetryPeriod >= o.RenewDeadline {
		return o, fmt.Errorf("sharding: RetryPeriod (%s) must be shorter than RenewDeadline (%s)", o.RetryPeriod, o.RenewDeadline)
	}
	if errs := validation.IsDNS1123Label(o.Ring); len(errs) > 0 {
		return o, fmt.Errorf("sharding: ring %q must be a DNS label (it starts Lease names and is a label value): %s", o.Ring, strings.Join(errs, "; "))
	}
	if o.Identity == "" {
		o.Identity = DefaultIdentity()
	}
	if errs := validation.IsDNS1123Label(o.Identity); len(errs) > 0 {
		return o, fmt.Errorf("sharding: identity %q must be a DNS label (its Lease is %q): %s", o.Identity, memberLeaseName(o.Ring, o.Identity), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(memberLeaseName(o.Ring, o.Identity)); len(errs) > 0 {
		return o, fmt.Errorf("sharding: member Lease name %q is not a valid name: %s", memberLeaseName(o.Ring, o.Identity), strings.Join(errs, "; "))
	}
	return o, nil
}

// DefaultIdentity returns the host name, lowercased with every character
// outside [a-z0-9-] replaced by '-', trimmed to fit a DNS label, then "-"
// and 5 random characters of [a-z0-9]: unique enough for two replicas on
// one host.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	host = strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			return c
		case c >= 'A' && c <= 'Z':
			return c - 'A' + 'a'
		}
		return '-'
	}, host)
	if len(host) > validation.DNS1123LabelMaxLength-6 {
		host = host[:validation.DNS1123LabelMaxLength-6]
	}
	host = strings.Trim(host, "-")
	if host == "" {
		host = "member"
	}
	return host + "-" + randSuffix(5)
}

// randSuffix returns n random characters of [a-z0-9].
func randSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
