package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

func newGenerateConfigCommand() *cobra.Command {
	var (
		o             auth.KubeconfigOptions
		namespaces    string
		rulesJSON     string
		rulesFile     string
		resourceNames []string
		keyFile       string
		certFile      string
	)
	cmd := &cobra.Command{
		Use:   "generate-config --user USER --namespaces NS[,NS...]|\"*\" --server-address HOST:PORT (--tls-key-file KEY | --http)",
		Short: "Print a kubeconfig with a signed token for the view API server",
		Long: `generate-config prints a kubeconfig for the view API server. In production
mode it holds a bearer token (a JWT signed with --tls-key-file, the
server's key) that names the user, the namespaces the user may access
("*" for all, which also allows requests across all namespaces) and RBAC
rules (Kubernetes PolicyRule JSON: verbs, apiGroups, resources,
resourceNames; "*" and globs such as "*.view.dcontroller.io" match many).
Without --rules the token allows every verb on every resource.
--resource-names sets the resourceNames of every rule: requests naming an
object (get, update, patch, delete) are limited to those names, lists and
watches stay allowed, create and deletecollection are not.

With --tls-cert-file the server certificate is embedded so kubectl
verifies the server; --insecure skips verification instead. --http makes
an http:// config for a development-mode server, which needs no token
(one is still signed when --tls-key-file is given).`,
		Example: `  # development mode
  dctl generate-config --http --user=dev --namespaces="*" --server-address=localhost:8443 > dev.config

  # a user limited to named objects in one namespace
  dctl generate-config --user=alice --namespaces=team-a \
    --rules='[{"verbs":["get","update"],"apiGroups":["*.view.dcontroller.io"],"resources":["*"]}]' \
    --resource-names=web-app,api-service \
    --tls-key-file=apiserver.key --tls-cert-file=apiserver.crt --server-address=localhost:8443 > alice.config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			usage := func(format string, a ...any) error { return &exitError{code: 1, err: fmt.Errorf(format, a...)} }
			if o.User == "" {
				return usage("--user is required")
			}
			if namespaces == "" {
				return usage(`--namespaces is required (a comma-separated list, or "*" for all)`)
			}
			for _, ns := range strings.Split(namespaces, ",") {
				ns = strings.TrimSpace(ns)
				if ns != auth.AllNamespaces {
					if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
						return usage("--namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
					}
				}
				o.Namespaces = append(o.Namespaces, ns)
			}
			if o.ServerAddress == "" {
				return usage("--server-address is required")
			}
			if rulesJSON != "" && rulesFile != "" {
				return usage("give --rules or --rules-file, not both")
			}
			if rulesFile != "" {
				b, err := os.ReadFile(rulesFile)
				if err != nil {
					return usage("--rules-file: %v", err)
				}
				rulesJSON = string(b)
			}
			if rulesJSON != "" {
				rules, err := parseRules(rulesJSON)
				if err != nil {
					return usage("--rules: %v", err)
				}
				o.Rules = rules
			}
			o.ResourceNames = resourceNames
			if keyFile != "" {
				key, err := auth.LoadPrivateKeyFile(keyFile)
				if err != nil {
					return usage("--tls-key-file: %v", err)
				}
				o.Key = key
			} else if !o.HTTP {
				return usage("--tls-key-file is required to sign the token (or use --http for a development-mode server)")
			}
			if certFile != "" && !o.HTTP {
				_, pemData, err := auth.LoadCertificateFile(certFile)
				if err != nil {
					return usage("--tls-cert-file: %v", err)
				}
				o.CACertPEM = pemData
			}
			if !o.HTTP && o.CACertPEM == nil && !o.Insecure {
				return usage("give --tls-cert-file so kubectl can verify the server, or --insecure to skip verification")
			}
			cfg, _, err := auth.NewKubeconfig(o)
			if err != nil {
				return usage("%v", err)
			}
			out, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.User, "user", "", "user name the token authenticates")
	fs.StringVar(&namespaces, "namespaces", "", `comma-separated namespaces the user may access, or "*" for all`)
	fs.StringVar(&rulesJSON, "rules", "", "RBAC rules as a JSON list of Kubernetes PolicyRules (default: everything)")
	fs.StringVar(&rulesFile, "rules-file", "", "file holding the --rules JSON")
	fs.StringSliceVar(&resourceNames, "resource-names", nil, "comma-separated object names every rule is restricted to")
	fs.DurationVar(&o.Expiry, "expiry", auth.DefaultExpiry, "how long the token is valid")
	fs.BoolVar(&o.HTTP, "http", false, "make an http:// config for a development-mode server (no token needed)")
	fs.BoolVar(&o.Insecure, "insecure", false, "skip TLS verification of the server (insecure-skip-tls-verify)")
	fs.StringVar(&keyFile, "tls-key-file", "", "the API server's private key; signs the token")
	fs.StringVar(&certFile, "tls-cert-file", "", "the API server's certificate, embedded as certificate-authority-data")
	fs.StringVar(&o.ServerAddress, "server-address", "", "HOST:PORT of the API server")
	return cmd
}

// parseRules decodes a JSON list of PolicyRules, refusing unknown fields
// and rules that could never match.
func parseRules(s string) ([]rbacv1.PolicyRule, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var rules []rbacv1.PolicyRule
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("not a JSON list of PolicyRules: %w", err)
	}
	if len(rules) == 0 {
		return nil, errors.New("the list is empty")
	}
	for i, r := range rules {
		switch {
		case len(r.NonResourceURLs) > 0:
			return nil, fmt.Errorf("[%d].nonResourceURLs: not supported (reading discovery is always allowed)", i)
		case len(r.Verbs) == 0:
			return nil, fmt.Errorf("[%d].verbs: at least one verb is required", i)
		case len(r.APIGroups) == 0:
			return nil, fmt.Errorf(`[%d].apiGroups: at least one group is required (e.g. "*.view.dcontroller.io")`, i)
		case len(r.Resources) == 0:
			return nil, fmt.Errorf(`[%d].resources: at least one resource is required (e.g. "*")`, i)
		}
	}
	return rules, nil
}
