package main

import (
	"crypto"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

func newGetConfigCommand() *cobra.Command {
	var kubeconfig, contextName, certFile, keyFile string
	cmd := &cobra.Command{
		Use:   "get-config [--tls-cert-file CERT]",
		Short: "Show the API server token of the current kubeconfig: user, namespaces, rules, validity",
		Long: `get-config reads the token of the current context's user in the kubeconfig
($KUBECONFIG, ~/.kube/config, or --kubeconfig) and prints its user,
namespaces, rules and validity period. With --tls-cert-file (the server's
certificate) or --tls-key-file (its key) it also verifies the signature,
issuer and audience as the server would.

Exit status: 0 when the token is valid (or was only decoded, without a
certificate or key to verify it), 2 when it is invalid (bad signature,
expired, not yet valid), 1 on other errors (no kubeconfig, no token).`,
		Example: `  KUBECONFIG=alice.config dctl get-config --tls-cert-file=apiserver.crt`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			if kubeconfig != "" {
				rules.ExplicitPath = kubeconfig
			}
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
				&clientcmd.ConfigOverrides{CurrentContext: contextName}).RawConfig()
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("loading the kubeconfig: %w", kubeconfigError(rules, err))}
			}
			if len(cfg.Contexts) == 0 {
				return &exitError{code: 1, err: fmt.Errorf("loading the kubeconfig: %w", kubeconfigError(rules, clientcmd.ErrEmptyConfig))}
			}
			ctxName := cfg.CurrentContext
			if contextName != "" {
				ctxName = contextName
			}
			kctx, ok := cfg.Contexts[ctxName]
			if !ok {
				return &exitError{code: 1, err: fmt.Errorf("the kubeconfig has no context %q", ctxName)}
			}
			server := ""
			if c := cfg.Clusters[kctx.Cluster]; c != nil {
				server = c.Server
			}
			user := cfg.AuthInfos[kctx.AuthInfo]
			if user == nil || user.Token == "" {
				return &exitError{code: 1, err: fmt.Errorf("context %q (server %s): user %q has no token (a development-mode config needs none)", ctxName, server, kctx.AuthInfo)}
			}
			var pub crypto.PublicKey
			var source string
			switch {
			case certFile != "" && keyFile != "":
				return &exitError{code: 1, err: errors.New("give --tls-cert-file or --tls-key-file, not both")}
			case certFile != "":
				cert, _, err := auth.LoadCertificateFile(certFile)
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				pub, source = cert.PublicKey, certFile
			case keyFile != "":
				key, err := auth.LoadPrivateKeyFile(keyFile)
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				pub, source = key.Public(), keyFile
			}
			claims, alg, err := auth.ParseUnverified(user.Token)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			w := cmd.OutOrStdout()
			printClaims(w, ctxName, server, alg, claims)
			if pub == nil {
				fmt.Fprintln(w, "Signature:   not verified (give --tls-cert-file or --tls-key-file)")
				return nil
			}
			if _, err := auth.ParseToken(user.Token, pub, auth.ValidationOptions{}); err != nil {
				fmt.Fprintf(w, "Signature:   INVALID against %s: %v\n", source, err)
				return &exitError{code: 2, err: fmt.Errorf("the token is not valid for this server: %w", err)}
			}
			fmt.Fprintf(w, "Signature:   valid (%s, verified with %s)\n", alg, source)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to read (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&contextName, "context", "", "context to read (default: the current context)")
	fs.StringVar(&certFile, "tls-cert-file", "", "the API server's certificate, to verify the token")
	fs.StringVar(&keyFile, "tls-key-file", "", "the API server's private key, to verify the token")
	return cmd
}

func printClaims(w io.Writer, ctxName, server, alg string, c *auth.Claims) {
	fmt.Fprintf(w, "Context:     %s\n", ctxName)
	fmt.Fprintf(w, "Server:      %s\n", server)
	fmt.Fprintf(w, "User:        %s\n", c.Username)
	fmt.Fprintf(w, "Namespaces:  %s\n", strings.Join(c.Namespaces, ", "))
	if len(c.Rules) == 0 {
		fmt.Fprintln(w, "Rules:       (none: no resource access)")
	} else {
		fmt.Fprintln(w, "Rules:")
		for _, r := range c.Rules {
			line := fmt.Sprintf("  - verbs=%s apiGroups=%s resources=%s", list(r.Verbs), list(r.APIGroups), list(r.Resources))
			if len(r.ResourceNames) > 0 {
				line += " resourceNames=" + list(r.ResourceNames)
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "Issuer:      %s\n", c.Issuer)
	fmt.Fprintf(w, "Audience:    %s\n", strings.Join(c.Audience, ", "))
	fmt.Fprintf(w, "Algorithm:   %s\n", alg)
	now := time.Now()
	fmt.Fprintf(w, "Issued at:   %s\n", stamp(c.IssuedAt))
	fmt.Fprintf(w, "Not before:  %s\n", stamp(c.NotBefore))
	status := ""
	switch {
	case c.ExpiresAt == nil:
		status = " (no expiry: the server refuses it)"
	case now.After(c.ExpiresAt.Time):
		status = fmt.Sprintf(" (EXPIRED %s ago)", now.Sub(c.ExpiresAt.Time).Round(time.Second))
	case c.NotBefore != nil && now.Before(c.NotBefore.Time):
		status = fmt.Sprintf(" (NOT YET VALID, starts in %s)", c.NotBefore.Time.Sub(now).Round(time.Second))
	default:
		status = fmt.Sprintf(" (valid for %s more)", c.ExpiresAt.Time.Sub(now).Round(time.Second))
	}
	fmt.Fprintf(w, "Expires:     %s%s\n", stamp(c.ExpiresAt), status)
}

func list(l []string) string { return "[" + strings.Join(l, ",") + "]" }

func stamp(d *jwt.NumericDate) string {
	if d == nil {
		return "-"
	}
	return d.UTC().Format(time.RFC3339)
}
