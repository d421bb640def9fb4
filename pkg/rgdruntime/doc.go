// Package rgdruntime runs kro's ResourceGraphDefinitions (api/kro/v1alpha1)
// in the manager (dctl start --rgd). Its Reconciler is the only place that
// knows an RGD is being run: for each RGD it
//
//   - compiles it (pkg/rgd) into the instance kind's CustomResourceDefinition
//     and an ordinary Operator;
//   - applies the CRD (server-side apply, field manager FieldManager, kro's
//     ownership labels) and waits until the API server says Established;
//   - runs the Operator's controllers on the same operator.Runtime that runs
//     Operator objects, and reports their readiness into the RGD's status
//     (the GraphAccepted, KindReady, ControllerReady and Ready conditions,
//     state, topologicalOrder and resources), not into an Operator object;
//   - keeps InstanceFinalizer (kro's instance finalizer) on each instance
//     of a running RGD, by a metadata informer on the instance kind, and
//     removes it from an instance being deleted once no object of the kinds
//     the RGD writes carries the instance's labels: the compiled
//     controller deletes them dependents first (pkg/rgd), the finalizer
//     keeps the instance, and so its deletionTimestamp, visible until then.
//     A restarted manager goes on where it was; an RGD that disappears
//     without its cleanup releases its instances;
//   - on deletion (the RGD carries Finalizer), keeps the CRD and the
//     controllers while instances remain, saying so in the Ready condition,
//     then stops the controllers, releases the instance finalizers, deletes
//     the CRD and releases the RGD.
//
// One RGD's failure (a compile error, a CRD the API server refuses, a CRD
// owned by another RGD) is reported on that RGD only; the others run on.
package rgdruntime
