package noderelay

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/arizuko/arizukod/gateway"
	"github.com/arizuko/arizukod/groupfolder"
)

// nodeCNPrefix starts the common name of a node's certificate: "arizukod node <name>", or
// "arizukod node *" for a certificate any node may present (AnyNode).
const nodeCNPrefix = "arizukod node "

// AnyNode is the node name of a certificate every node of a DaemonSet may share: a
// connection with it claims its node in its header. A per-node certificate binds the
// claim to its own name, so a node that leaks its key cannot speak for another node.
const AnyNode = "*"

// NodeValidity is how long a node's certificate is valid; issue a new one before then.
const NodeValidity = 365 * 24 * time.Hour

// OpenCA opens the relay's CA of the data directory layout names, making it once.
func OpenCA(layout groupfolder.Layout, instance string) (*gateway.CA, error) {
	keyPath, err := layout.RelayCAKeyPath()
	if err != nil {
		return nil, err
	}
	return gateway.OpenCAFor("relay", keyPath, "", instance)
}

// NodeCert is what a node needs to reach the central: the CA's certificate (to know the
// central) and its own certificate and key. Never the CA's key.
type NodeCert struct {
	Node string `json:"node"`
	CA   []byte `json:"ca"`
	Cert []byte `json:"cert"`
	Key  []byte `json:"key"`
}

// IssueNode signs a client certificate for node (a node's name, or AnyNode).
func IssueNode(ca *gateway.CA, node string) (NodeCert, error) {
	if err := checkNodeName(node); err != nil {
		return NodeCert{}, err
	}
	cert, key, err := ca.Issue(nodeCNPrefix+node, nil, x509.ExtKeyUsageClientAuth, NodeValidity)
	if err != nil {
		return NodeCert{}, err
	}
	return NodeCert{Node: node, CA: ca.CertPEM(), Cert: cert, Key: key}, nil
}

// checkNodeName checks a Kubernetes node name (a DNS subdomain) or AnyNode.
func checkNodeName(node string) error {
	if node == AnyNode {
		return nil
	}
	if node == "" || len(node) > 253 {
		return fmt.Errorf("node name %q: 1 to 253 characters (or %q for any node)", node, AnyNode)
	}
	for i := 0; i < len(node); i++ {
		c := node[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("node name %q: a node's name is lower-case letters, digits, '-' and '.' (or %q for any node)", node, AnyNode)
		}
	}
	return nil
}

// nodeOf is the node a verified client certificate speaks for.
func nodeOf(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("no client certificate")
	}
	name, ok := strings.CutPrefix(cs.PeerCertificates[0].Subject.CommonName, nodeCNPrefix)
	if !ok || checkNodeName(name) != nil {
		return "", fmt.Errorf("client certificate %q is not a node's", cs.PeerCertificates[0].Subject.CommonName)
	}
	return name, nil
}

// ServerTLS is the central's TLS configuration: TLS 1.3, a certificate of ca for
// ServerName (renewed a day before it expires), and a client certificate of ca required.
func ServerTLS(ca *gateway.CA) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM()) {
		return nil, errors.New("relay CA: no certificate")
	}
	var (
		mu   sync.Mutex
		leaf *tls.Certificate
	)
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		if leaf != nil && time.Until(leaf.Leaf.NotAfter) > 24*time.Hour {
			return leaf, nil
		}
		certPEM, keyPEM, err := ca.Issue(ServerName, []string{ServerName}, x509.ExtKeyUsageServerAuth, 30*24*time.Hour)
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		leaf = &c
		return leaf, nil
	}
	if _, err := get(nil); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      pool,
		GetCertificate: get,
	}, nil
}

// NodeTLS is a node's TLS configuration from its NodeCert's PEMs: TLS 1.3, its own
// certificate, and the central known by ca's signature on a certificate for ServerName.
func NodeTLS(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if b, _ := pem.Decode(caPEM); b == nil || !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("relay CA certificate: no PEM certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		RootCAs:      pool,
		ServerName:   ServerName,
		Certificates: []tls.Certificate{cert},
	}, nil
}

// Secret is the Kubernetes Secret (kubernetes.io/tls, with ca.crt) holding nc, named name
// in namespace: what the node DaemonSet mounts.
func Secret(nc NodeCert, namespace, name string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "arizuko"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": nc.CA, corev1.TLSCertKey: nc.Cert, corev1.TLSPrivateKeyKey: nc.Key},
	}
}
