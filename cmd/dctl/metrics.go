package main

import (
	"context"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// withMetrics runs fn while serving the Prometheus metrics endpoint on addr
// ("0" serves none). dctl run --standalone has no controller-runtime
// manager to serve it, so the manager's own metrics server is run here:
// the same /metrics handler over the same registry as dctl start's. A
// metrics server that cannot listen stops fn and is the error.
func withMetrics(ctx context.Context, addr string, fn func(context.Context) error) error {
	srv, err := metricsserver.NewServer(metricsserver.Options{BindAddress: addr}, nil, nil)
	if err != nil || srv == nil {
		if err != nil {
			return err
		}
		return fn(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	metricsErr := make(chan error, 1)
	go func() { metricsErr <- srv.Start(ctx) }()
	fnErr := make(chan error, 1)
	go func() { fnErr <- fn(ctx) }()
	select {
	case err := <-fnErr:
		cancel()
		<-metricsErr
		return err
	case err := <-metricsErr:
		cancel()
		if ferr := <-fnErr; err == nil {
			return ferr
		}
		return err
	}
}
