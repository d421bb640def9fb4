package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigError explains err, an error of loading a kubeconfig by rules,
// when no configuration was found at all: client-go's message then asks
// for KUBERNETES_MASTER, which dctl does not read, and does not say that
// the files it looked at are missing (a missing file of $KUBECONFIG is
// skipped without a word). The answer names each file looked at and why
// it gave nothing. Other errors are returned as they are.
func kubeconfigError(rules *clientcmd.ClientConfigLoadingRules, err error) error {
	if err == nil || !clientcmd.IsEmptyConfig(err) {
		return err
	}
	if rules.ExplicitPath != "" {
		return fmt.Errorf("no cluster configuration found in --kubeconfig %s", describeKubeconfigFile(rules.ExplicitPath))
	}
	var files []string
	for _, p := range rules.GetLoadingPrecedence() {
		files = append(files, describeKubeconfigFile(p))
	}
	src := "~/.kube/config"
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		src = "$" + clientcmd.RecommendedConfigPathEnvVar
	}
	return fmt.Errorf("no cluster configuration found in %s (%s): give --kubeconfig or set $%s",
		src, strings.Join(files, ", "), clientcmd.RecommendedConfigPathEnvVar)
}

// describeKubeconfigFile is path with why it gave no configuration.
func describeKubeconfigFile(path string) string {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return path + ": no such file"
	case err != nil:
		return path + ": " + err.Error()
	case st.IsDir():
		return path + ": a directory"
	default:
		return path + ": no cluster, user or context in it"
	}
}
