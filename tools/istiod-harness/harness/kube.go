package harness

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"
	kubelib "istio.io/istio/pkg/kube"
)

func objectGVR(o runtime.Object) (schema.GroupVersionResource, schema.GroupVersionKind, error) {
	k := o.GetObjectKind().GroupVersionKind()
	if k.Kind == "" {
		gvks, _, err := kubelib.IstioScheme.ObjectKinds(o)
		if err != nil || len(gvks) == 0 {
			return schema.GroupVersionResource{}, k, fmt.Errorf("kind of %T unknown: %v", o, err)
		}
		k = gvks[0]
	}
	gk := config.FromKubernetesGVK(k)
	r, ok := gvk.ToGVR(gk)
	if !ok {
		r, _ = meta.UnsafeGuessKindToResource(k)
	}
	if r.Group == "core" {
		r.Group = ""
	}
	return r, k, nil
}

func kubeKey(o runtime.Object) (string, error) {
	r, _, err := objectGVR(o)
	if err != nil {
		return "", err
	}
	a, err := meta.Accessor(o)
	if err != nil {
		return "", err
	}
	return r.String() + "/" + a.GetNamespace() + "/" + a.GetName(), nil
}

// applyKube makes the fake kube client (core Kubernetes objects) hold exactly objs.
// Gateway API and other non-core objects are loaded at start only.
func (s *Server) applyKube(objs []runtime.Object) ([]string, error) {
	next := map[string]runtime.Object{}
	for _, o := range objs {
		k, err := kubeKey(o)
		if err != nil {
			return nil, err
		}
		next[k] = o
	}
	cs, ok := s.Fake.KubeClient().Kube().(*fake.Clientset)
	if !ok {
		return nil, fmt.Errorf("kube client is %T, not the fake clientset", s.Fake.KubeClient().Kube())
	}
	tr := cs.Tracker()
	var changes []string
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o := next[k]
		r, _, _ := objectGVR(o)
		a, _ := meta.Accessor(o)
		old, had := s.kube[k]
		if had {
			jo, _ := json.Marshal(old)
			jn, _ := json.Marshal(o)
			if string(jo) == string(jn) {
				continue
			}
		}
		if r.Group != "" && r.Group != "apps" && r.Group != "discovery.k8s.io" {
			return changes, fmt.Errorf("%s: changing a %s object live is not supported (restart the harness)", k, r.Group)
		}
		var err error
		if had {
			err = tr.Update(r, o, a.GetNamespace())
			changes = append(changes, "updated "+k)
		} else {
			err = tr.Create(r, o, a.GetNamespace())
			changes = append(changes, "created "+k)
		}
		if err != nil {
			return changes, fmt.Errorf("%s: %v", k, err)
		}
		s.kube[k] = o
	}
	for k, o := range s.kube {
		if _, ok := next[k]; ok {
			continue
		}
		r, _, _ := objectGVR(o)
		a, _ := meta.Accessor(o)
		if err := tr.Delete(r, a.GetNamespace(), a.GetName()); err != nil {
			return changes, fmt.Errorf("delete %s: %v", k, err)
		}
		delete(s.kube, k)
		changes = append(changes, "deleted "+k)
	}
	return changes, nil
}
