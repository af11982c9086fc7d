// The Kubernetes suite renders and checks the manifests too, so that it stands on its own; npm test runs the same file.
import './manifests.test.js';
