"""The fields of each kind a scenario holds whose JSON types the API server decodes (see
koordpy.simulate.typecheck): the fields the simulator reads, or hands on to the scheduler."""

from __future__ import annotations

from typing import Any

from koordpy.simulate.typecheck import (
    BOOLEAN,
    INT32,
    INT64,
    INT_OR_STRING,
    OBJECT,
    QUANTITY,
    STRING,
    TIME,
    MapOf,
)

__all__ = ["CLAIM", "KIND_SCHEMAS", "LABEL_SELECTOR", "METADATA", "POD", "POD_SPEC"]

STRING_MAP = MapOf(STRING)
METADATA: dict[str, Any] = {
    "name": STRING,
    "namespace": STRING,
    "generateName": STRING,
    "uid": STRING,
    "resourceVersion": STRING,
    "generation": INT64,
    "labels": STRING_MAP,
    "annotations": STRING_MAP,
    "creationTimestamp": TIME,
    "deletionTimestamp": TIME,
    "deletionGracePeriodSeconds": INT64,
    "finalizers": [STRING],
    "ownerReferences": [
        {
            "apiVersion": STRING,
            "kind": STRING,
            "name": STRING,
            "uid": STRING,
            "controller": BOOLEAN,
            "blockOwnerDeletion": BOOLEAN,
        }
    ],
    "managedFields": [OBJECT],
}
LABEL_SELECTOR: dict[str, Any] = {
    "matchLabels": STRING_MAP,
    "matchExpressions": [{"key": STRING, "operator": STRING, "values": [STRING]}],
}
_NODE_SELECTOR_TERM: dict[str, Any] = {
    "matchExpressions": [{"key": STRING, "operator": STRING, "values": [STRING]}],
    "matchFields": [{"key": STRING, "operator": STRING, "values": [STRING]}],
}
# a claim's spec, as a PersistentVolumeClaim, a StatefulSet's volumeClaimTemplates and a pod's
# generic ephemeral volume hold it
_CLAIM_SPEC: dict[str, Any] = {
    "accessModes": [STRING],
    "selector": LABEL_SELECTOR,
    "resources": {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY)},
    "volumeName": STRING,
    "storageClassName": STRING,
    "volumeMode": STRING,
    "dataSource": OBJECT,
    "dataSourceRef": OBJECT,
    "volumeAttributesClassName": STRING,
}
CLAIM: dict[str, Any] = {
    "metadata": METADATA,
    "spec": _CLAIM_SPEC,
    "status": {
        "phase": STRING,
        "accessModes": [STRING],
        "capacity": MapOf(QUANTITY),
        "allocatedResources": MapOf(QUANTITY),
        "conditions": [OBJECT],
    },
}
_DISK = {"fsType": STRING, "partition": INT32, "readOnly": BOOLEAN}
_VOLUME_SOURCES: dict[str, Any] = {
    "gcePersistentDisk": {"pdName": STRING, **_DISK},
    "awsElasticBlockStore": {"volumeID": STRING, **_DISK},
    "azureDisk": {"diskName": STRING, "diskURI": STRING, "readOnly": BOOLEAN},
    "cinder": {"volumeID": STRING, "readOnly": BOOLEAN},
    "rbd": {"monitors": [STRING], "pool": STRING, "image": STRING, "readOnly": BOOLEAN},
    "iscsi": {"targetPortal": STRING, "iqn": STRING, "lun": INT32, "readOnly": BOOLEAN},
}
_POD_AFFINITY_TERM: dict[str, Any] = {
    "labelSelector": LABEL_SELECTOR,
    "namespaceSelector": LABEL_SELECTOR,
    "namespaces": [STRING],
    "topologyKey": STRING,
    "matchLabelKeys": [STRING],
    "mismatchLabelKeys": [STRING],
}
_POD_AFFINITY: dict[str, Any] = {
    "requiredDuringSchedulingIgnoredDuringExecution": [_POD_AFFINITY_TERM],
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": INT32, "podAffinityTerm": _POD_AFFINITY_TERM}
    ],
}
_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_NODE_SELECTOR_TERM]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": INT32, "preference": _NODE_SELECTOR_TERM}
        ],
    },
    "podAffinity": _POD_AFFINITY,
    "podAntiAffinity": _POD_AFFINITY,
}
_CONTAINER: dict[str, Any] = {
    "name": STRING,
    "image": STRING,
    "imagePullPolicy": STRING,
    "command": [STRING],
    "args": [STRING],
    "workingDir": STRING,
    "ports": [
        {"name": STRING, "hostPort": INT32, "containerPort": INT32, "protocol": STRING, "hostIP": STRING}
    ],
    "env": [{"name": STRING, "value": STRING, "valueFrom": OBJECT}],
    "envFrom": [OBJECT],
    "resources": {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY), "claims": [{"name": STRING}]},
    "resizePolicy": [{"resourceName": STRING, "restartPolicy": STRING}],
    "restartPolicy": STRING,
    "volumeMounts": [{"name": STRING, "mountPath": STRING, "readOnly": BOOLEAN, "subPath": STRING}],
    "livenessProbe": OBJECT,
    "readinessProbe": OBJECT,
    "startupProbe": OBJECT,
    "lifecycle": OBJECT,
    "securityContext": OBJECT,
    "terminationMessagePath": STRING,
    "terminationMessagePolicy": STRING,
    "stdin": BOOLEAN,
    "stdinOnce": BOOLEAN,
    "tty": BOOLEAN,
}
POD_SPEC: dict[str, Any] = {
    "containers": [_CONTAINER],
    "initContainers": [_CONTAINER],
    "ephemeralContainers": [OBJECT],
    "volumes": [
        {
            "name": STRING,
            "persistentVolumeClaim": {"claimName": STRING, "readOnly": BOOLEAN},
            "ephemeral": {"volumeClaimTemplate": {"metadata": METADATA, "spec": _CLAIM_SPEC}},
            "csi": {"driver": STRING, "readOnly": BOOLEAN, "volumeAttributes": STRING_MAP},
            **_VOLUME_SOURCES,
        }
    ],
    "restartPolicy": STRING,
    "terminationGracePeriodSeconds": INT64,
    "activeDeadlineSeconds": INT64,
    "dnsPolicy": STRING,
    "nodeSelector": STRING_MAP,
    "serviceAccountName": STRING,
    "serviceAccount": STRING,
    "automountServiceAccountToken": BOOLEAN,
    "nodeName": STRING,
    "hostNetwork": BOOLEAN,
    "hostPID": BOOLEAN,
    "hostIPC": BOOLEAN,
    "shareProcessNamespace": BOOLEAN,
    "securityContext": OBJECT,
    "imagePullSecrets": [{"name": STRING}],
    "hostname": STRING,
    "subdomain": STRING,
    "affinity": _AFFINITY,
    "schedulerName": STRING,
    "tolerations": [
        {"key": STRING, "operator": STRING, "value": STRING, "effect": STRING, "tolerationSeconds": INT64}
    ],
    "hostAliases": [{"ip": STRING, "hostnames": [STRING]}],
    "priorityClassName": STRING,
    "priority": INT32,
    "dnsConfig": OBJECT,
    "readinessGates": [{"conditionType": STRING}],
    "runtimeClassName": STRING,
    "enableServiceLinks": BOOLEAN,
    "preemptionPolicy": STRING,
    "overhead": MapOf(QUANTITY),
    "topologySpreadConstraints": [
        {
            "maxSkew": INT32,
            "topologyKey": STRING,
            "whenUnsatisfiable": STRING,
            "labelSelector": LABEL_SELECTOR,
            "minDomains": INT32,
            "nodeAffinityPolicy": STRING,
            "nodeTaintsPolicy": STRING,
            "matchLabelKeys": [STRING],
        }
    ],
    "setHostnameAsFQDN": BOOLEAN,
    "os": {"name": STRING},
    "hostUsers": BOOLEAN,
    "schedulingGates": [{"name": STRING}],
    "resourceClaims": [OBJECT],
    "resources": {"requests": MapOf(QUANTITY), "limits": MapOf(QUANTITY)},
}
_CONDITION: dict[str, Any] = {
    "type": STRING,
    "status": STRING,
    "reason": STRING,
    "message": STRING,
    "lastTransitionTime": TIME,
    "lastProbeTime": TIME,
    "lastHeartbeatTime": TIME,
    "observedGeneration": INT64,
}
POD: dict[str, Any] = {
    "metadata": METADATA,
    "spec": POD_SPEC,
    "status": {
        "phase": STRING,
        "conditions": [_CONDITION],
        "message": STRING,
        "reason": STRING,
        "nominatedNodeName": STRING,
        "hostIP": STRING,
        "podIP": STRING,
        "startTime": TIME,
        "qosClass": STRING,
    },
}
_POD_TEMPLATE: dict[str, Any] = {"metadata": METADATA, "spec": POD_SPEC}
_REPLICATED: dict[str, Any] = {
    "replicas": INT32,
    "selector": LABEL_SELECTOR,
    "template": _POD_TEMPLATE,
    "minReadySeconds": INT32,
    "revisionHistoryLimit": INT32,
    "progressDeadlineSeconds": INT32,
    "paused": BOOLEAN,
    "strategy": OBJECT,
    "updateStrategy": OBJECT,
    "serviceName": STRING,
    "podManagementPolicy": STRING,
    "volumeClaimTemplates": [CLAIM],
    "persistentVolumeClaimRetentionPolicy": OBJECT,
    "ordinals": {"start": INT32},
}
_JOB: dict[str, Any] = {
    "parallelism": INT32,
    "completions": INT32,
    "activeDeadlineSeconds": INT64,
    "backoffLimit": INT32,
    "backoffLimitPerIndex": INT32,
    "maxFailedIndexes": INT32,
    "selector": LABEL_SELECTOR,
    "manualSelector": BOOLEAN,
    "template": _POD_TEMPLATE,
    "ttlSecondsAfterFinished": INT32,
    "completionMode": STRING,
    "suspend": BOOLEAN,
    "podFailurePolicy": OBJECT,
    "successPolicy": OBJECT,
    "podReplacementPolicy": STRING,
    "managedBy": STRING,
}
_WORKLOAD_STATUS: dict[str, Any] = {"conditions": [_CONDITION]}
KIND_SCHEMAS: dict[str, dict[str, Any]] = {
    "Pod": POD,
    "Node": {
        "metadata": METADATA,
        "spec": {
            "unschedulable": BOOLEAN,
            "taints": [{"key": STRING, "value": STRING, "effect": STRING, "timeAdded": TIME}],
            "podCIDR": STRING,
            "podCIDRs": [STRING],
            "providerID": STRING,
        },
        "status": {
            "allocatable": MapOf(QUANTITY),
            "capacity": MapOf(QUANTITY),
            "images": [{"names": [STRING], "sizeBytes": INT64}],
            "conditions": [_CONDITION],
            "addresses": [{"type": STRING, "address": STRING}],
            "phase": STRING,
        },
    },
    "Namespace": {"metadata": METADATA, "spec": {"finalizers": [STRING]}, "status": {"phase": STRING}},
    "PriorityClass": {
        "metadata": METADATA,
        "value": INT32,
        "globalDefault": BOOLEAN,
        "description": STRING,
        "preemptionPolicy": STRING,
    },
    "PodGroup": {
        "metadata": METADATA,
        "spec": {
            "minMember": INT32,
            "scheduleTimeoutSeconds": INT32,
            "minResources": MapOf(QUANTITY),
            "queue": STRING,
            "priorityClassName": STRING,
        },
        "status": {
            "phase": STRING,
            "occupiedBy": STRING,
            "scheduled": INT32,
            "running": INT32,
            "succeeded": INT32,
            "failed": INT32,
            "scheduleStartTime": TIME,
        },
    },
    # the layers' own shape is the topology's to judge: a bad one makes the object unusable
    "ClusterNetworkTopology": {"metadata": METADATA, "spec": OBJECT},
    "ElasticQuota": {
        "metadata": METADATA,
        "spec": {"min": MapOf(QUANTITY), "max": MapOf(QUANTITY)},
        "status": {"used": MapOf(QUANTITY)},
    },
    "PodDisruptionBudget": {
        "metadata": METADATA,
        "spec": {
            "minAvailable": INT_OR_STRING,
            "maxUnavailable": INT_OR_STRING,
            "selector": LABEL_SELECTOR,
            "unhealthyPodEvictionPolicy": STRING,
        },
        "status": {
            "observedGeneration": INT64,
            "disruptedPods": MapOf(TIME),
            "disruptionsAllowed": INT32,
            "currentHealthy": INT32,
            "desiredHealthy": INT32,
            "expectedPods": INT32,
            "conditions": [_CONDITION],
        },
    },
    "ReplicaSet": {"metadata": METADATA, "spec": _REPLICATED, "status": _WORKLOAD_STATUS},
    "Deployment": {"metadata": METADATA, "spec": _REPLICATED, "status": _WORKLOAD_STATUS},
    "StatefulSet": {"metadata": METADATA, "spec": _REPLICATED, "status": _WORKLOAD_STATUS},
    "Job": {"metadata": METADATA, "spec": _JOB, "status": _WORKLOAD_STATUS},
    "StorageClass": {
        "metadata": METADATA,
        "provisioner": STRING,
        "parameters": STRING_MAP,
        "reclaimPolicy": STRING,
        "mountOptions": [STRING],
        "allowVolumeExpansion": BOOLEAN,
        "volumeBindingMode": STRING,
        "allowedTopologies": [{"matchLabelExpressions": [{"key": STRING, "values": [STRING]}]}],
    },
    "PersistentVolume": {
        "metadata": METADATA,
        "spec": {
            "capacity": MapOf(QUANTITY),
            "accessModes": [STRING],
            "claimRef": {
                "apiVersion": STRING,
                "kind": STRING,
                "namespace": STRING,
                "name": STRING,
                "uid": STRING,
                "resourceVersion": STRING,
                "fieldPath": STRING,
            },
            "persistentVolumeReclaimPolicy": STRING,
            "storageClassName": STRING,
            "mountOptions": [STRING],
            "volumeMode": STRING,
            "volumeAttributesClassName": STRING,
            "nodeAffinity": {"required": {"nodeSelectorTerms": [_NODE_SELECTOR_TERM]}},
            "csi": {
                "driver": STRING,
                "volumeHandle": STRING,
                "readOnly": BOOLEAN,
                "fsType": STRING,
                "volumeAttributes": STRING_MAP,
            },
            "local": {"path": STRING, "fsType": STRING},
            "hostPath": {"path": STRING, "type": STRING},
            **_VOLUME_SOURCES,
        },
        "status": {"phase": STRING, "message": STRING, "reason": STRING, "lastPhaseTransitionTime": TIME},
    },
    "PersistentVolumeClaim": CLAIM,
    "CSINode": {
        "metadata": METADATA,
        "spec": {
            "drivers": [
                {
                    "name": STRING,
                    "nodeID": STRING,
                    "topologyKeys": [STRING],
                    "allocatable": {"count": INT32},
                }
            ]
        },
    },
    "CSIDriver": {
        "metadata": METADATA,
        "spec": {
            "attachRequired": BOOLEAN,
            "podInfoOnMount": BOOLEAN,
            "volumeLifecycleModes": [STRING],
            "storageCapacity": BOOLEAN,
            "fsGroupPolicy": STRING,
            "tokenRequests": [OBJECT],
            "requiresRepublish": BOOLEAN,
            "seLinuxMount": BOOLEAN,
            "nodeAllocatableUpdatePeriodSeconds": INT64,
        },
    },
    "CSIStorageCapacity": {
        "metadata": METADATA,
        "storageClassName": STRING,
        "nodeTopology": LABEL_SELECTOR,
        "capacity": QUANTITY,
        "maximumVolumeSize": QUANTITY,
    },
    "VolumeAttachment": {
        "metadata": METADATA,
        "spec": {
            "attacher": STRING,
            "nodeName": STRING,
            "source": {"persistentVolumeName": STRING, "inlineVolumeSpec": OBJECT},
        },
        "status": {
            "attached": BOOLEAN,
            "attachmentMetadata": STRING_MAP,
            "attachError": OBJECT,
            "detachError": OBJECT,
        },
    },
}
