package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

func newGenerateKeysCommand() *cobra.Command {
	var (
		hostnames []string
		keyType   string
		validity  time.Duration
		outDir    string
		force     bool
	)
	cmd := &cobra.Command{
		Use:   "generate-keys --hostname HOST [--hostname HOST2 ...]",
		Short: "Make the API server's TLS certificate and key (the key also signs tokens)",
		Long: `generate-keys writes a private key and a self-signed serving certificate
for the view API server: apiserver.key (PKCS#8 PEM, mode 0600) and
apiserver.crt (PEM). The certificate has a subject alternative name for
each --hostname: an IP SAN for an address, a DNS SAN otherwise, so list
every name and address clients use to reach the server.

Run the manager with --api-server-mode=production --tls-cert-file
apiserver.crt --tls-key-file apiserver.key, and mint kubeconfigs with
dctl generate-config --tls-key-file apiserver.key. An RSA key signs tokens
with RS256, an ECDSA (P-256) key with ES256.`,
		Example: `  dctl generate-keys --hostname localhost --hostname 127.0.0.1
  dctl generate-keys --hostname=localhost,10.0.0.7 --key-type ecdsa --output-dir /etc/dcontroller`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(hostnames) == 0 {
				return &exitError{code: 1, err: errors.New("at least one --hostname is required")}
			}
			certPath := filepath.Join(outDir, "apiserver.crt")
			keyPath := filepath.Join(outDir, "apiserver.key")
			if !force {
				for _, p := range []string{certPath, keyPath} {
					if _, err := os.Stat(p); err == nil {
						return &exitError{code: 1, err: fmt.Errorf("%s exists; use --force to overwrite it", p)}
					}
				}
			}
			certPEM, keyPEM, err := auth.GenerateKeys(auth.KeyOptions{Hostnames: hostnames, Type: auth.KeyType(keyType), Validity: validity})
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
				return err
			}
			if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s key) and %s (valid %s for %s)\n",
				keyPath, strings.ToUpper(keyTypeOrDefault(keyType)), certPath, validity, strings.Join(hostnames, ", "))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&hostnames, "hostname", nil, "DNS name or IP address of the server; repeatable or comma-separated")
	fs.StringVar(&keyType, "key-type", string(auth.RSA), "key type: rsa (2048 bits, RS256 tokens) or ecdsa (P-256, ES256 tokens)")
	fs.DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificate is valid")
	fs.StringVar(&outDir, "output-dir", ".", "directory to write apiserver.crt and apiserver.key into")
	fs.BoolVar(&force, "force", false, "overwrite existing files")
	return cmd
}

func keyTypeOrDefault(t string) string {
	if t == "" {
		return string(auth.RSA)
	}
	return t
}
