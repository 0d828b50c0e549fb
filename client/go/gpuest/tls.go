package gpuest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSOptions is the transport security of a client, as the C++ client's
// ClientTlsOptions. All empty: plaintext (a server on loopback). CAFile alone: TLS,
// the server's certificate checked against that CA and the target's host name or IP.
// With CertFile and KeyFile too: mutual TLS, for a server started with --tls-client-ca.
type TLSOptions struct {
	CAFile   string // PEM CA bundle that signed the server's certificate.
	CertFile string // PEM client certificate chain (mutual TLS).
	KeyFile  string // PEM private key of CertFile.
}

// transportCredentials is the dial option of tls: an error naming the field for an
// incomplete or unreadable configuration.
func transportCredentials(o TLSOptions) (grpc.DialOption, error) {
	if (o.CertFile == "") != (o.KeyFile == "") {
		if o.CertFile == "" {
			return nil, fmt.Errorf("gpuest: TLS.CertFile: required with TLS.KeyFile")
		}
		return nil, fmt.Errorf("gpuest: TLS.KeyFile: required with TLS.CertFile")
	}
	if o.CAFile == "" {
		if o.CertFile != "" {
			return nil, fmt.Errorf("gpuest: TLS.CAFile: required with a client certificate " +
				"(the CA of the server's)")
		}
		return grpc.WithInsecure(), nil
	}
	ca, err := readPem(o.CAFile, "TLS.CAFile")
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("gpuest: TLS.CAFile: %s holds no certificate", o.CAFile)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if o.CertFile != "" {
		cert, err := readPem(o.CertFile, "TLS.CertFile")
		if err != nil {
			return nil, err
		}
		key, err := readPem(o.KeyFile, "TLS.KeyFile")
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("gpuest: TLS.CertFile, TLS.KeyFile: %v", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(config)), nil
}

func readPem(path, field string) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gpuest: %s: cannot read %s: %v", field, path, err)
	}
	if !bytes.Contains(text, []byte("-----BEGIN ")) {
		return nil, fmt.Errorf("gpuest: %s: %s is not a PEM file", field, path)
	}
	return text, nil
}
